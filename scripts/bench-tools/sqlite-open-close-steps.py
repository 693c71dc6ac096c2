#!/usr/bin/env python3
"""What opening and closing a small WAL store costs on this disk, step by step, with Python's
sqlite3 and ubiquityd's pragmas (docs/benchmarks.md, W6 "What a cold call waited for"): the
writer's open + schema transaction, a first read connection + one read, the close-time TRUNCATE
checkpoint of one commit, the writer's close. 60 stores of 200 rows in a temporary directory.

    python3 scripts/bench-tools/sqlite-open-close-steps.py
"""
import sqlite3, time, os, tempfile, statistics
d = tempfile.mkdtemp(prefix="ubq-open-steps-")
N=60
paths=[]
for i in range(N):
    p=f"{d}/s{i}.sqlite"; c=sqlite3.connect(p, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=FULL")
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, age INT)")
    c.execute("CREATE TABLE ubq_meta(key TEXT PRIMARY KEY, value ANY)")
    c.execute("INSERT INTO ubq_meta VALUES('model_json', ?)", ("x"*2000,))
    c.executemany("INSERT INTO t(name,age) VALUES(?,?)", [(f"n{j}", j) for j in range(200)])
    c.close(); paths.append(p)
opens=[]; reads=[]; closes=[]; ckpt=[]
for p in paths:
    t0=time.perf_counter()
    w=sqlite3.connect(p, isolation_level=None)
    w.execute("PRAGMA journal_mode=WAL"); w.execute("PRAGMA synchronous=FULL"); w.execute("PRAGMA wal_autocheckpoint=0")
    w.execute("BEGIN IMMEDIATE"); w.execute("CREATE TABLE IF NOT EXISTS ubq_meta(key TEXT PRIMARY KEY, value ANY)"); w.execute("SELECT value FROM ubq_meta").fetchall(); w.execute("COMMIT")
    t1=time.perf_counter()
    r=sqlite3.connect(f"file:{p}?mode=ro", uri=True, isolation_level=None); r.execute("PRAGMA mmap_size=1073741824"); r.execute("SELECT * FROM t WHERE id=5").fetchall()
    t2=time.perf_counter()
    w.execute("INSERT INTO t(name,age) VALUES('x',1)")
    t3=time.perf_counter()
    r.close()
    w.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    t4=time.perf_counter()
    w.close()
    t5=time.perf_counter()
    opens.append((t1-t0)*1e3); reads.append((t2-t1)*1e3); ckpt.append((t4-t3)*1e3); closes.append((t5-t4)*1e3)
def s(n,x): x=sorted(x); print(f"{n}: p50 {x[len(x)//2]:.2f} ms  p95 {x[int(len(x)*.95)]:.2f} ms max {x[-1]:.2f}")
s("writer open+schema txn",opens); s("first reader open+read",reads); s("TRUNCATE checkpoint (1 commit in WAL)",ckpt); s("writer close",closes)
import shutil
shutil.rmtree(d, ignore_errors=True)
