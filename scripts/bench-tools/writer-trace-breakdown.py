#!/usr/bin/env python3
"""Where each save's time went, from a writer trace (issue 22, docs/benchmarks.md "Issue 22: what
the remaining save tail is made of").

The trace comes from a build with `issue22-writer-trace.patch` applied (a study tool, not part of
the product): `git apply scripts/bench-tools/issue22-writer-trace.patch`, build ubiquityd in release,
run it with UBQ_WRITER_TRACE=/path/trace.csv, drive W2 with ubiquity-load, stop it (the trace is
flushed when the store closes). Lines: `S,queued,groupStart` per save (monotonic ns), `G,groupStart,
commitStart,commitEnd,saves` per group commit, `C,start,end,action` per after-commit checkpoint step;
the last step adds `,readerWait,passive,restart` (its bounded wait for readers, its PASSIVE checkpoint
to the WAL's end = copy + database sync, its RESTART).

For each save: time queued behind earlier groups, time queued behind checkpoint work (the
after-commit steps that ran while it waited), its own group's saves before COMMIT, and its own
COMMIT (WAL write + fsync). Printed by latency band, with the checkpoint steps' own durations.

usage: writer-trace-breakdown.py trace.csv
"""
import sys, bisect, collections
S=[];G={};C=[];L=[]
for line in open(sys.argv[1]):
    p=line.strip().split(',')
    if p[0]=='S': S.append((int(p[1]),int(p[2])))
    elif p[0]=='G': G[int(p[1])]=(int(p[2]),int(p[3]),int(p[4]))
    elif p[0]=='C':
        C.append((int(p[1]),int(p[2]),p[3]))
        if len(p)>=7: L.append(tuple(int(x)/1e6 for x in p[4:7]))
C.sort(); cs=[c[0] for c in C]
rows=[]
for q,g in S:
    if g not in G: continue
    tc,te,n=G[g]
    if tc==0: continue
    ck=0; kinds=set()
    i=bisect.bisect_left(cs,q-10**9)
    while i<len(C) and C[i][0]<g:
        a,b,k=C[i]; ov=min(b,g)-max(a,q)
        if ov>0: ck+=ov; kinds.add(k.split('(')[0])
        i+=1
    tot=te-q; wait=g-q
    rows.append((tot/1e6, (wait-ck)/1e6, ck/1e6, (tc-g)/1e6, (te-tc)/1e6, n, tuple(sorted(kinds))))
rows.sort()
N=len(rows)
def pct(p): return rows[min(N-1,int(p/100*N))][0]
print(f"saves {N}  server-side latency p50 {pct(50):.1f} p99 {pct(99):.1f} p99.9 {pct(99.9):.1f} max {rows[-1][0]:.1f} ms")
for lo,hi,name in ((0,50,'below p50'),(50,90,'p50-p90'),(90,99,'p90-p99'),(99,100,'top 1%')):
    sub=rows[int(lo/100*N):int(hi/100*N)] or rows[-1:]
    m=len(sub); f=lambda k: sum(r[k] for r in sub)/m
    kinds=collections.Counter(k for r in sub for k in r[6])
    print(f"{name:10s} n={m:5d} total {f(0):6.1f} = queued behind groups {f(1):5.1f} + behind checkpoint work {f(2):5.1f} + own group's saves {f(3):5.1f} + own COMMIT {f(4):5.1f}  group size {f(5):4.1f}  ckpt kinds {dict(kinds)}")
# checkpoint actions summary
d=collections.defaultdict(list)
for a,b,k in C: d[k.split('(')[0]].append((b-a)/1e6)
for k,v in d.items():
    v.sort(); print(f"action {k:12s} n={len(v):5d} mean {sum(v)/len(v):6.2f} p99 {v[int(.99*len(v))]:6.1f} max {v[-1]:6.1f} ms")
gs=sorted((te-tc)/1e6 for g,(tc,te,n) in G.items() if tc)
print(f"COMMIT (WAL write + fsync) p50 {gs[len(gs)//2]:.2f} p99 {gs[int(.99*len(gs))]:.2f} max {gs[-1]:.2f} ms; groups {len(gs)}, mean size {sum(n for _,_,n in G.values())/len(G):.1f}")
if L:
    m=len(L); print(f"last step split: reader wait {sum(l[0] for l in L)/m:.2f} + PASSIVE to the WAL's end (copy + database sync) {sum(l[1] for l in L)/m:.1f} (max {max(l[1] for l in L):.1f}) + RESTART {sum(l[2] for l in L)/m:.2f} ms mean, n={m}")
