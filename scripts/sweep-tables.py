#!/usr/bin/env python3
"""sweep-tables.py - do sharded sweeps give the unsharded sweep's table?
Compares the tables that tune --from-results built from the merged rows of
each run (DIR/table/table.csv beside DIR/merged.csv or DIR/all.csv) with a
reference run's: per problem whether the pick is the same candidate and, when
not, how much slower the other run's pick is by the reference run's own rows
(and the reference's pick by the other run's rows): a pick that differs only
within the measurements' scatter costs ~0 either way.
usage: scripts/sweep-tables.py REF_DIR DIR...   (exit 0; 2 on a missing file)"""
import csv, os, sys

def rows(d):
    for name in ('merged.csv', 'all.csv'):
        p = os.path.join(d, name)
        if os.path.exists(p):
            out = {}
            for r in csv.DictReader(l for l in open(p) if not l.startswith('#')):
                if r['status'] != 'ok':
                    continue
                k = (r['format'], r['N'], r['K'], r['M'])
                c = (r['variant'], r['tile_m'], r['tile_n'], r['tile_k'], r['num_threadgroups'], r['split_k'])
                out[(k, c)] = float(r['median_s'])
            return out
    sys.exit('sweep-tables: no merged.csv or all.csv in %s' % d)

def picks(d):
    p = os.path.join(d, 'table', 'table.csv')
    if not os.path.exists(p):
        sys.exit('sweep-tables: %s is missing' % p)
    out = {}
    for r in csv.DictReader(l for l in open(p) if not l.startswith('#')):
        if r['N'] == '0':
            continue
        k = (r['format'], r['N'], r['K'], r['expected_m'])
        out[k] = (r['variant'], r['tile_m'], r['tile_n'], r['tile_k'], r['num_threadgroups'], r['split_k'])
    return out

if len(sys.argv) < 3:
    sys.exit(__doc__)
ref = sys.argv[1]
rr, rp = rows(ref), picks(ref)
print('reference %s: %d problems' % (ref, len(rp)))
for d in sys.argv[2:]:
    dr, dp = rows(d), picks(d)
    same = sum(1 for k in rp if dp.get(k) == rp[k])
    worse_in_ref = [rr[(k, dp[k])] / rr[(k, rp[k])] - 1 for k in rp if k in dp and (k, dp[k]) in rr]
    worse_in_own = [dr[(k, rp[k])] / dr[(k, dp[k])] - 1 for k in rp if k in dp and (k, rp[k]) in dr]
    keys_same = set(k for k, c in rr) == set(k for k, c in dr)
    print('%s: keys %s; same pick %d of %d; its pick by the reference rows: mean +%.2f%%, worst +%.2f%%; '
          'the reference pick by its rows: mean +%.2f%%, worst +%.2f%%'
          % (d, 'the same' if keys_same and len(rr) == len(dr) else 'DIFFER', same, len(rp),
             100 * sum(worse_in_ref) / max(1, len(worse_in_ref)), 100 * max(worse_in_ref or [0]),
             100 * sum(worse_in_own) / max(1, len(worse_in_own)), 100 * max(worse_in_own or [0])))
