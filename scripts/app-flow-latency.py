#!/usr/bin/env python3
"""Latency of the app flow's main calls, one call at a time, through stock grpcio (a client we
did not write, so its own overhead is in the figures — ubiquity-load measures throughput).

    .venv-test/bin/python scripts/app-flow-latency.py HOST:PORT [--objects 10000] [--calls 1000]

Creates a fresh store, loads it with BatchInsert, then times: GetObjects of one object by ID,
a 100-object Save, an indexed predicate Fetch (10 results) at the current generation and the
same Fetch pinned at an older token while saves continued. Prints p50/p90/p99 in ms.
Bounded: every phase is a fixed number of calls, each with a 30 s deadline.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import ubiq_harness  # noqa: E402

sys.path.insert(0, str(ubiq_harness.generate_stubs(Path(tempfile.mkdtemp(prefix="ubiq-lat-")))))

import grpc  # noqa: E402

from ubiq_client import Client, ob, person_model, st, v  # noqa: E402


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] * 1000


def timed(n, fn):
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("address")
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=1000)
    a = ap.parse_args()
    ch = grpc.insecure_channel(a.address)
    grpc.channel_ready_future(ch).result(timeout=15)
    c = Client(ch)
    sid = c.open(f"latency-{uuid.uuid4()}", model=person_model())
    ids = []
    for start in range(0, a.objects, 1000):
        r = c.stores.BatchInsert(st.BatchInsertRequest(store_id=sid, entity="Person", return_object_ids=True, objects=[
            st.ObjectValues(values={"name": v(f"P{i}"), "age": v(i % (a.objects // 10 or 1)), "score": v(float(i))})
            for i in range(start, min(a.objects, start + 1000))]), timeout=120)
        ids += list(r.object_ids)
    ages = a.objects // 10 or 1
    rows = {}
    rows["GetObjects, 1 object by ID"] = timed(a.calls, lambda i: c.get(sid, [random.choice(ids)]))
    rows["Save, 100 inserts"] = timed(max(1, a.calls // 5), lambda i: c.save(sid, inserts=[
        ob.Insert(temporary_id=f"t{j}", entity="Person", values={"name": v(f"S{i}-{j}"), "age": v(-1)}) for j in range(100)]))
    token = c.current(sid).token
    c.insert_people(sid, [{"name": "later", "age": 1}])
    pred = dict(predicate="age == $a")
    def fetch(i, tok=b""):
        r = c.stores.Fetch(st.FetchRequest(store_id=sid, at=ob.ReadGeneration(token=tok), fetch=ob.FetchSpec(
            entity="Person", variables={"a": ob.Argument(value=v(random.randrange(ages)))}, **pred)), timeout=30)
        assert len(r.objects) >= 10
    rows["Fetch age == $a (10 results), current"] = timed(a.calls, fetch)
    rows["Fetch age == $a (10 results), pinned at a token"] = timed(a.calls, lambda i: fetch(i, token))
    print(f"{a.objects} objects; {a.calls} calls per row (Save: {max(1, a.calls // 5)}); one call at a time through grpcio")
    print(f"{'call':52} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for k, s in rows.items():
        print(f"{k:52} {pct(s, 50):8.3f} {pct(s, 90):8.3f} {pct(s, 99):8.3f} {statistics.mean(s) * 1000:8.3f}")


if __name__ == "__main__":
    main()
