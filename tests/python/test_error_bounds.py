"""Error details stay small enough for any gRPC client, and full conflict records are still to be
had (issue 15, item 2).

A merge conflict on an object holding a 5,000-character value used to produce ~21 KB of trailers;
a default grpcio client then reported RESOURCE_EXHAUSTED ("received metadata size exceeds hard
limit") instead of ABORTED, and could not tell that nothing was applied. Now the trailers stay
under 8 KiB (docs/errors.md), the ConflictDetails say when they were cut, and a save that sets
`conflicts_in_response` gets every record in full in its response body (nothing applied).
"""

from __future__ import annotations

import grpc
import pytest

from ubiq_client import Client, cx, error_of, ob, person_model, st, unpack, v, values

LONG = "é" * 2500 + "x" * 2500   # 5,000 characters, 7,500 bytes of UTF-8


def trailer_bytes(err: grpc.RpcError) -> int:
    """The size of the trailers as HPACK counts a header list (name + value + 32 each)."""
    return sum(len(k) + len(val if isinstance(val, bytes) else val.encode()) + 32
               for k, val in err.trailing_metadata() or ())


def conflicting_update(client: Client, sid: str) -> tuple[str, ob.Update]:
    """An object whose long name changed in the store after the client read it, and the client's
    now stale update."""
    (ann,) = client.insert_people(sid, [{"name": LONG, "age": 30}])
    client.save(sid, updates=[ob.Update(object_id=ann, expected_version=1, values={"name": v(LONG + "!")})])
    stale = ob.Update(object_id=ann, expected_version=1, values={"name": v("z" + LONG)},
                      snapshot={"name": v(LONG), "age": v(30)})
    return ann, stale


def test_conflict_on_a_large_object_reaches_a_default_client_as_aborted(client):
    sid = client.open(model=person_model())
    ann, stale = conflicting_update(client, sid)
    before = client.current(sid).generation
    with pytest.raises(grpc.RpcError) as e:
        client.save(sid, updates=[stale])
    code, message, reason, _, conflicts = error_of(e.value)
    assert code == grpc.StatusCode.ABORTED, message
    assert reason == "MERGE_CONFLICT"
    assert trailer_bytes(e.value) < 8 * 1024
    assert conflicts is not None and conflicts.total_conflicts == 1
    # the values did not fit: the record still names the object and both versions
    assert conflicts.truncated
    (c,) = conflicts.conflicts
    assert c.object_id == ann and c.client_version == 1 and c.store_version == 2
    assert "conflicts_in_response" in message
    assert client.current(sid).generation == before
    assert values(client.get(sid, [ann]).objects[0])["name"] == LONG + "!"


def test_conflicts_in_response_returns_every_record_in_full_and_applies_nothing(client):
    sid = client.open(model=person_model())
    ann, stale = conflicting_update(client, sid)
    (bob,) = client.insert_people(sid, [{"name": "Bob", "age": 40}])
    before = client.current(sid)
    r = client.save(sid, updates=[stale], inserts=[ob.Insert(temporary_id="t", entity="Person", values={"name": v("Cy")})],
                    conflicts_in_response=True)
    assert len(r.unresolved_conflicts) == 1
    c = r.unresolved_conflicts[0]
    assert c.object_id == ann and c.kind == ob.ConflictRecord.KIND_VERSION_CHANGED
    assert unpack(c.store_values["name"]) == LONG + "!"
    assert unpack(c.client_changes["name"]) == "z" + LONG
    assert unpack(c.client_snapshot["name"]) == LONG
    # nothing applied: same generation, no permanent IDs, Cy not inserted
    assert r.token == before.token and not r.permanent_ids and not r.versions
    assert client.current(sid).generation == before.generation
    assert [unpack(o.values["name"]) for o in client.fetch(sid, "Person", predicate="name == 'Cy'").objects] == []
    # a save without conflicts is unaffected by the flag
    ok = client.save(sid, updates=[ob.Update(object_id=bob, expected_version=1, values={"age": v(41)})],
                     conflicts_in_response=True)
    assert not ok.unresolved_conflicts and ok.generation == before.generation + 1


def test_many_conflicts_are_listed_within_the_bound(client):
    sid = client.open(model=person_model())
    ids = client.insert_people(sid, [{"name": f"p{i}-" + "n" * 300, "age": i} for i in range(60)])
    client.save(sid, updates=[ob.Update(object_id=i, expected_version=1, values={"age": v(99)}) for i in ids])
    stale = [ob.Update(object_id=i, expected_version=1, values={"age": v(1)}) for i in ids]
    with pytest.raises(grpc.RpcError) as e:
        client.save(sid, updates=stale)
    code, _, reason, _, conflicts = error_of(e.value)
    assert (code, reason) == (grpc.StatusCode.ABORTED, "MERGE_CONFLICT")
    assert trailer_bytes(e.value) < 8 * 1024
    assert conflicts.total_conflicts == 60 and conflicts.truncated
    assert 0 < len(conflicts.conflicts) < 60
    full = client.save(sid, updates=stale, conflicts_in_response=True)
    assert sorted(c.object_id for c in full.unresolved_conflicts) == sorted(ids)


def test_context_save_with_conflicts_in_response_keeps_the_pending_changes(client):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": LONG, "age": 30}])
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui")).context_id
    # the context reads Ann (and pins there); then the store moves on under it
    client.contexts.Fetch(cx.ContextFetchRequest(context_id=ctx, fetch=ob.FetchSpec(entity="Person")))
    client.save(sid, updates=[ob.Update(object_id=ann, expected_version=1, values={"age": v(35)})])
    client.contexts.Update(cx.ContextUpdateRequest(context_id=ctx, updates=[ob.Update(object_id=ann, values={"age": v(31)})]))
    r = client.contexts.Save(cx.ContextSaveRequest(context_id=ctx, conflicts_in_response=True))
    assert [c.object_id for c in r.result.unresolved_conflicts] == [ann]
    assert unpack(r.result.unresolved_conflicts[0].store_values["age"]) == 35
    assert r.state.has_changes
    # the same save without the flag fails as before
    with pytest.raises(grpc.RpcError) as e:
        client.contexts.Save(cx.ContextSaveRequest(context_id=ctx))
    assert error_of(e.value)[:1] == (grpc.StatusCode.ABORTED,)


@pytest.mark.parametrize("call", ["fetch", "batch_insert", "batch_delete"])
def test_huge_names_in_a_request_end_the_call_with_a_bounded_status(client, call):
    sid = client.open(model=person_model())
    entity = "😀" * 20_000
    with pytest.raises(grpc.RpcError) as e:
        if call == "fetch":
            client.fetch(sid, entity)
        elif call == "batch_insert":
            client.stores.BatchInsert(st.BatchInsertRequest(
                store_id=sid, entity=entity, objects=[st.ObjectValues(values={"name": v("a")})]), timeout=30)
        else:
            client.stores.BatchDelete(st.BatchDeleteRequest(store_id=sid, entity=entity, predicate="TRUEPREDICATE"),
                                      timeout=30)
    code, message, reason, _, _ = error_of(e.value)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert reason is not None
    assert trailer_bytes(e.value) < 8 * 1024
    assert len(message.encode()) < 2048

