# core.fixtures.sh - the files core.cases feeds the seven tools, made in the
# scratch directory (sourced by test_badinput.sh with $B the build directory
# and $root the source tree).
"$B/bench" --chip m4max --shape 3x64x256 --formats u4 --budget 0.01 --max-reps 5 \
    --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --out good.csv >/dev/null 2>&1
sed 's/^"[23]",/"9",/' good.csv > newer.csv                       # a schema from the future
{ cat good.csv; printf '"broken\n'; } > malformed.csv        # an unterminated quote
{ head -n 2 good.csv; printf '1,"0.4.0","r","h","d","m4max","cpu","u4",3,64,256,64,"marlin_gemm_fused_u4",8,64,64,0,1,"ok","",1e-3,1e-3,1e-3,0,1e-3,1e-3,1,1,1,"1e-3","",""\n'; } > oknumbers.csv
sed 's/,3,64,256,64,/,3,4294967552,256,64,/' oknumbers.csv > wrapped.csv   # N past 2^32
sed 's/,"ok","",1e-3,/,"ok","",nan,/' oknumbers.csv > nanmedian.csv
printf 'model,layer,N,K\nx,y,64,\000256\n' > nul.csv            # a NUL byte in a field
sed 's/^m4max,gpu_cores,40,/m4max,gpu_cores,nan,/' "$root/harness/chips.csv" > nanchips.csv
sed 's/^m4max,mem_bw_gbs,[^,]*,/m4max,mem_bw_gbs,inf,/' "$root/harness/chips.csv" > infchips.csv
printf 'term,variant,value,unit\nn_holdout,,1e10,rows\n' > hugemodel.csv
printf 'term,variant,value,unit\nn_fit,,1e20,rows\n' > fitmodel.csv
cp "$root/results/m4max/model.csv" goodmodel.csv
printf 'just some text\n' > file                               # a file where a directory should be
mkdir -p garbage/host foreign/host empty/host
printf 'not,a,table\n' > garbage/host/table.csv
"$B/tune" --chip m4max --suite smoke --m 1 --out-dir foreign/m4 >/dev/null 2>&1
cp -L foreign/m4/table.csv foreign/host/table.csv              # m4max's table where host's belongs
sed 's/^# cost-model: term traffic /# cost-model: term launch /' foreign/host/table.csv > badterm.csv
pubhead='chip,format,group,M,N,K,variant,tile_m,tile_n,tile_k,num_threadgroups,split_k,published_ms,role,source'
pubrow='u4,64,12,2560,2560,mlx_qmm_splitk,32,32,32,0,1,0.079'
printf '%s\nm9,%s,fit,"x"\n' "$pubhead" "$pubrow" > pubchip.csv          # unknown chip
printf '%s\nm3max,%s,guess,"x"\n' "$pubhead" "$pubrow" > pubrole.csv      # unknown role
printf '%s\nm3max,%s,fit,\n' "$pubhead" "$pubrow" > pubsource.csv        # no source
printf '%s\nm3max,u4,64,12,2560,2560,mlx_qmm_splitk,32,32,32,0,1,0,fit,"x"\n' "$pubhead" > pubtime.csv
printf '%s\nm3max,u4,64,12,2560,2500,mlx_qmm_splitk,32,32,32,0,1,0.079,fit,"x"\n' "$pubhead" > pubgroup.csv
printf '%s\nm3max,u4,64,12,2560,2560,mlx_qmm_splitk,32,4096,32,0,1,0.079,fit,"x"\n' "$pubhead" > pubtile.csv
rm -rf foreign/m4
printf 'token,slot,expert,prob\n0,0,3,0.6\n0,1,200,0.4\n' > route.csv   # an expert out of range

printf 'model,layer,N,K\nabcdefghijabcdefghijabcdefghij12,q,64,256\n' > longname.csv   # 32 characters
printf 'model,layer,N,K\nhuge,w,16777216,16777216\n' > hugesuite.csv            # no machine holds it
mkdir -p planted/tables && printf 'keep\n' > planted/precious.txt
ln -s .. planted/tables/current                                           # tune must not delete through it
ln -s good.csv linked.csv                                                 # appended only if not a link
mkdir -p hostlink garbage-res m1/x.manifest.csv ts/tune-shard-1-of-2.manifest.csv
ln -s ../good.csv hostlink/tune-results.csv                              # tune's results file a link
printf 'not,a,results,file\n' > garbage-res/tune-results.csv
