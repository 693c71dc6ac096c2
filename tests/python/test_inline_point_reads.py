"""GetObjects answered on the event-loop thread (--inline-point-reads, the default) must answer
exactly as the blocking pool does (--no-inline-point-reads): the same bytes for every response and
the same status, message and reason for every error, over one data directory served both ways."""

from __future__ import annotations

import uuid

import grpc

from conftest import make_channel
from ubiq_client import Client, error_of, ob, person_model, st, v


def _answers(srv, requests):
    ch = make_channel(srv.address)
    try:
        stores = Client(ch).stores
        out = []
        for req, timeout in requests:
            try:
                out.append(("ok", stores.GetObjects(req, timeout=timeout).SerializeToString(deterministic=True)))
            except grpc.RpcError as e:
                code, message, reason, violations, _ = error_of(e)
                out.append(("error", code, message, reason, [(f.field, f.description) for f in violations]))
        return out
    finally:
        ch.close()


def test_inline_and_pooled_get_objects_answer_identically(start_server):
    a = start_server(name="inline")
    ch = make_channel(a.address)
    c = Client(ch)
    sid = c.open(model=person_model())
    other = c.open(model=person_model())
    ann, bob, cy = c.insert_people(sid, [{"name": "Ann", "age": 30}, {"name": "Bob", "age": 40}, {"name": "Cy"}])
    (dee,) = c.insert_people(other, [{"name": "Dee", "age": 20}])
    token = c.current(sid).token
    other_token = c.current(other).token
    c.save(sid, updates=[ob.Update(object_id=ann, values={"age": v(31)})], deletes=[ob.Delete(object_id=bob)])
    more = c.insert_people(sid, [{"name": f"P{i}", "age": i} for i in range(8)])
    ch.close()
    unknown = ann.replace("/p", "/p99")

    def req(store, ids, at=b"", timeout=30):
        return st.GetObjectsRequest(store_id=store, object_ids=ids, at=ob.ReadGeneration(token=at)), timeout

    requests = [
        req(sid, [ann]),                               # updated
        req(sid, [bob]),                               # deleted: missing now
        req(sid, [bob], at=token),                     # ... but readable at the pinned token
        req(sid, [ann, bob, cy, unknown], at=token),   # old versions, an unknown ID
        req(sid, [ann, bob, cy, unknown, ann]),        # repeated ID
        req(sid, [unknown]),
        req(sid, []),
        req(sid, [ann, cy] + more[:6]),                # 8 IDs: the inline bound
        req(sid, [ann, cy] + more),                    # 10 IDs: over it, the pool either way
        req(sid, [dee]),                               # another store's object
        req(sid, ["not-an-id"]),
        req(sid, [ann], at=other_token),               # another store's token
        req(sid, [ann], at=b"\x01garbage"),
        req(str(uuid.uuid4()), [ann]),                 # no such store
        req("nope", [ann]),
        req("", [ann]),
        req(other, [dee], at=other_token),
        req(sid, [cy], timeout=5),                     # with a deadline
    ]
    inline = _answers(a, requests)
    assert a.stop(timeout=30) == 0
    pooled = _answers(start_server(name="inline", args=["--no-inline-point-reads"]), requests)
    assert inline == pooled
    assert [r[0] for r in inline].count("ok") >= 10
