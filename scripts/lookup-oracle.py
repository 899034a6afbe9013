#!/usr/bin/env python3
# lookup-oracle.py TABLE.csv CHECK-RESULTS.csv - the best a lookup that chooses among a
# table's own candidates for an M range could do on every-candidate rows: per problem the
# measured best against the fastest measured table candidate (matched on variant, tile and
# split_k), and their geometric mean. Diagnostic for BENCHMARKS.md (issue 14).
import csv,sys,math
from collections import defaultdict
def rows(path):
    return list(csv.DictReader(l for l in open(path) if not l.startswith('#')))
tab=rows(sys.argv[1]); chk=rows(sys.argv[2])
meas=defaultdict(dict); 
for r in chk:
    if r['status']!='ok': continue
    key=(r['format'],int(r['M']),int(r['N']),int(r['K']))
    c=(r['variant'],r['tile_m'],r['tile_n'],r['tile_k'],r['num_threadgroups'],r['split_k'])
    t=float(r['median_s'])
    meas[key][c]=min(t,meas[key].get(c,1e9))
lg=[]
for key,d in sorted(meas.items()):
    f,M,N,K=key
    best=min(d.values())
    cands=[(r['variant'],r['tile_m'],r['tile_n'],r['tile_k'],r['num_threadgroups'],r['split_k']) for r in tab if r['format']==f and int(r['N'])>0 and int(r['m_lo'])<=M<=int(r['m_hi'])]
    # striped tg may be adapted; match ignoring tg
    ts=[]
    for c in cands:
        m=[t for cc,t in d.items() if cc[:4]==c[:4] and cc[5]==c[5]]
        if m: ts.append(min(m))
    o=min(ts) if ts else float('nan')
    print(key, "best %.4f oracle-over-table %.4f (%+.1f%%) n=%d/%d"%(best*1e3,o*1e3,(o/best-1)*100,len(ts),len(cands)))
    if ts: lg.append(math.log(o/best))
print("geomean oracle over table candidates: %+.1f%%"%((math.exp(sum(lg)/len(lg))-1)*100))
