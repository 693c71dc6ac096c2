"""The data services end to end (issue 5): a realistic app flow through stock grpcio against the
real ubiquityd, real SQLite files underneath. Each test works in stores of its own."""

from __future__ import annotations

import uuid

import grpc
import pytest

from conftest import make_channel
from ubiq_client import Client, cx, error_of, md, ob, person_model, st, unpack, v, values


def names(results) -> list[str]:
    return sorted(unpack(o.values["name"]) for o in results.objects)


def test_open_store_is_idempotent_and_listed(client):
    name = f"notes-{uuid.uuid4()}"
    a = client.stores.OpenStore(st.OpenStoreRequest(name=name))
    b = client.stores.OpenStore(st.OpenStoreRequest(name=name))
    assert a.created and not b.created
    assert a.store.store_id == b.store.store_id
    listed = client.stores.ListStores(st.ListStoresRequest())
    assert name in [s.name for s in listed.stores]
    with pytest.raises(grpc.RpcError) as e:
        client.stores.OpenStore(st.OpenStoreRequest(name=f"missing-{uuid.uuid4()}", must_exist=True))
    assert error_of(e.value)[:1] == (grpc.StatusCode.NOT_FOUND,)


def test_register_and_get_model(client):
    sid = client.open()
    preview = client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model(), dry_run=True))
    assert preview.dry_run and preview.steps
    assert client.models.GetModel(md.GetModelRequest(store_id=sid)).version_hash == ""
    r = client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model()))
    got = client.models.GetModel(md.GetModelRequest(store_id=sid))
    assert got.version_hash == r.version_hash and len(r.version_hash) == 64
    assert sorted(e.name for e in got.model.entities) == ["Note", "Person"]
    person = next(e for e in got.model.entities if e.name == "Person")
    assert [a.name for a in person.attributes if a.required] == ["name"]
    again = client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model()))
    assert again.unchanged


def test_save_get_objects_and_typed_values(client):
    sid = client.open(model=person_model())
    ids = client.insert_people(sid, [{"name": "Ann", "age": 31, "email": "ann@example.com", "score": 2.5}])
    got = client.get(sid, ids + [ids[0].replace("/p", "/p99")])
    assert len(got.objects) == 1 and len(got.missing_object_ids) == 1
    o = got.objects[0]
    assert o.entity == "Person" and o.version == 1
    # attribute values come back typed by the model: age is an int32 attribute
    assert o.values["age"].WhichOneof("kind") == "int32_value"
    assert values(o) == {"name": "Ann", "age": 31, "email": "ann@example.com", "score": 2.5}
    assert list(o.relationships["notes"].object_ids) == []


def test_pinned_reads_do_not_move_and_deleted_objects_stay_readable(client, second):
    sid = client.open(model=person_model())
    ann, bob = client.insert_people(sid, [{"name": "Ann", "age": 30}, {"name": "Bob", "age": 40}])
    token = client.current(sid).token
    # a second client changes the store: updates Ann, deletes Bob, inserts Cy
    second.save(sid, updates=[ob.Update(object_id=ann, values={"age": v(31)})],
                deletes=[ob.Delete(object_id=bob)])
    second.insert_people(sid, [{"name": "Cy", "age": 50}])
    pinned = client.fetch(sid, "Person", token=token)
    assert names(pinned) == ["Ann", "Bob"]
    assert pinned.token == token
    assert {unpack(o.values["name"]): unpack(o.values["age"]) for o in pinned.objects} == {"Ann": 30, "Bob": 40}
    current = client.fetch(sid, "Person")
    assert names(current) == ["Ann", "Cy"]
    # "never again could not fulfill a fault": Bob is still readable at the pin
    at_pin = client.get(sid, [bob], token=token)
    assert [values(o)["name"] for o in at_pin.objects] == ["Bob"]
    assert list(client.get(sid, [bob]).missing_object_ids) == [bob]


def test_conflict_under_error_policy_carries_details(client, second):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann", "age": 30, "score": 1.0}])
    before = client.current(sid).generation
    second.save(sid, updates=[ob.Update(object_id=ann, expected_version=1, values={"age": v(35)})])
    with pytest.raises(grpc.RpcError) as e:
        client.save(sid, updates=[ob.Update(object_id=ann, expected_version=1, values={"score": v(9.0)},
                                            snapshot={"name": v("Ann"), "age": v(30), "score": v(1.0)})])
    code, message, reason, _, conflicts = error_of(e.value)
    assert code == grpc.StatusCode.ABORTED and reason == "MERGE_CONFLICT"
    assert "changed" in message
    assert conflicts is not None and len(conflicts.conflicts) == 1
    c = conflicts.conflicts[0]
    assert c.object_id == ann and c.kind == ob.ConflictRecord.KIND_VERSION_CHANGED
    assert c.client_version == 1 and c.store_version == 2
    assert unpack(c.store_values["age"]) == 35 and unpack(c.client_changes["score"]) == 9.0
    # nothing applied
    assert client.current(sid).generation == before + 1
    assert values(client.get(sid, [ann]).objects[0])["score"] == 1.0


@pytest.mark.parametrize("policy,expect", [
    # both sides changed age; only the client changed score; only the store changed email
    (ob.MERGE_POLICY_MERGE_BY_PROPERTY_STORE_TRUMP, {"age": 35, "score": 9.0, "email": "new@x"}),
    (ob.MERGE_POLICY_MERGE_BY_PROPERTY_OBJECT_TRUMP, {"age": 33, "score": 9.0, "email": "new@x"}),
    (ob.MERGE_POLICY_OVERWRITE, {"age": 33, "score": 9.0, "email": "old@x"}),
    (ob.MERGE_POLICY_ROLLBACK, {"age": 35, "score": 1.0, "email": "new@x"}),
])
def test_conflict_under_each_trump_policy(client, second, policy, expect):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann", "age": 30, "score": 1.0, "email": "old@x"}])
    second.save(sid, updates=[ob.Update(object_id=ann, expected_version=1, values={"age": v(35), "email": v("new@x")})])
    r = client.save(sid, policy=policy, updates=[ob.Update(
        object_id=ann, expected_version=1, values={"age": v(33), "score": v(9.0)},
        snapshot={"name": v("Ann"), "age": v(30), "score": v(1.0), "email": v("old@x")})])
    got = values(client.get(sid, [ann]).objects[0])
    assert {k: got[k] for k in expect} == expect
    if policy == ob.MERGE_POLICY_ROLLBACK:
        assert list(r.skipped_object_ids) == [ann]
    else:
        assert len(r.resolved_conflicts) == 1


def test_uniqueness_clash_upserts_under_trump_policy(client):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann", "email": "ann@x", "age": 1}])
    with pytest.raises(grpc.RpcError) as e:
        client.save(sid, inserts=[ob.Insert(temporary_id="t", entity="Person", values={"name": v("Ann2"), "email": v("ann@x")})])
    code, _, reason, _, conflicts = error_of(e.value)
    assert code == grpc.StatusCode.ABORTED and reason == "CONSTRAINT_CONFLICT"
    assert conflicts.conflicts[0].kind == ob.ConflictRecord.KIND_UNIQUENESS_CLASH
    r = client.save(sid, policy=ob.MERGE_POLICY_MERGE_BY_PROPERTY_OBJECT_TRUMP,
                    inserts=[ob.Insert(temporary_id="t", entity="Person", values={"name": v("Ann2"), "email": v("ann@x")})])
    assert r.permanent_ids["t"] == ann
    assert values(client.get(sid, [ann]).objects[0])["name"] == "Ann2"


def test_client_transaction_id_and_dry_run(client):
    sid = client.open(model=person_model())
    ins = [ob.Insert(temporary_id="a", entity="Person", values={"name": v("Ann")})]
    dry = client.save(sid, inserts=ins, dry_run=True)
    assert dry.dry_run and client.current(sid).generation == 0
    first = client.save(sid, inserts=ins, client_transaction_id="tx-1")
    again = client.save(sid, inserts=ins, client_transaction_id="tx-1")
    assert again.replayed and again.permanent_ids["a"] == first.permanent_ids["a"]
    assert client.current(sid).generation == first.generation == 1


def test_child_context_saves_into_parent_then_parent_commits(client):
    sid = client.open(model=person_model())
    parent = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="main", author="dev1"))
    child = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="editor",
                                                                  parent_context_id=parent.context_id))
    ins = client.contexts.Insert(cx.ContextInsertRequest(context_id=child.context_id, inserts=[
        ob.Insert(temporary_id="a", entity="Person", values={"name": v("Ann"), "age": v(30)})]))
    temp = ins.object_ids["a"]
    assert "/Person/t" in temp
    saved = client.contexts.Save(cx.ContextSaveRequest(context_id=child.context_id))
    assert saved.saved_to_parent and not saved.state.has_changes
    assert client.current(sid).generation == 0          # nothing reached the store yet
    state = client.contexts.GetState(cx.ContextRequest(context_id=parent.context_id))
    assert state.has_changes and state.inserted_count == 1
    committed = client.contexts.Save(cx.ContextSaveRequest(context_id=parent.context_id))
    permanent = committed.result.permanent_ids[temp]
    assert "/Person/p" in permanent
    assert values(client.get(sid, [permanent]).objects[0])["name"] == "Ann"
    assert client.current(sid).generation == 1


def test_context_fetch_includes_pending_changes(client):
    sid = client.open(model=person_model())
    ann, bob = client.insert_people(sid, [{"name": "Ann", "age": 30}, {"name": "Bob", "age": 40}])
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui")).context_id
    client.contexts.Insert(cx.ContextInsertRequest(context_id=ctx, inserts=[
        ob.Insert(temporary_id="c", entity="Person", values={"name": v("Cy"), "age": v(45)})]))
    client.contexts.Update(cx.ContextUpdateRequest(context_id=ctx, updates=[ob.Update(object_id=ann, values={"age": v(41)})]))
    client.contexts.Delete(cx.ContextDeleteRequest(context_id=ctx, object_ids=[bob]))

    def fetch(exclude=False):
        return client.contexts.Fetch(cx.ContextFetchRequest(context_id=ctx, excludes_pending_changes=exclude, fetch=ob.FetchSpec(
            entity="Person", predicate="age > 35", sort_descriptors=[ob.SortDescriptor(key_path="name")])))
    assert [unpack(o.values["name"]) for o in fetch().objects] == ["Ann", "Cy"]
    assert [unpack(o.values["name"]) for o in fetch(exclude=True).objects] == ["Bob"]
    client.contexts.Rollback(cx.ContextRequest(context_id=ctx))
    assert [unpack(o.values["name"]) for o in fetch().objects] == ["Bob"]


def test_context_pin_moves_with_save_reset_and_set_query_generation(client, second):
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": "Ann"}])
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui")).context_id

    def count():
        return client.contexts.Fetch(cx.ContextFetchRequest(context_id=ctx, fetch=ob.FetchSpec(
            entity="Person", result_type=ob.RESULT_TYPE_COUNT))).count
    assert count() == 1                                  # first read pins
    second.insert_people(sid, [{"name": "Bob"}])
    assert count() == 1                                  # still pinned
    client.contexts.Reset(cx.ContextRequest(context_id=ctx))
    assert count() == 2                                  # reset re-pins at current
    old = client.current(sid).token
    second.insert_people(sid, [{"name": "Cy"}])
    client.contexts.SetQueryGeneration(cx.SetQueryGenerationRequest(
        context_id=ctx, generation_mode=cx.GENERATION_MODE_UNPINNED))
    assert count() == 3
    client.contexts.SetQueryGeneration(cx.SetQueryGenerationRequest(
        context_id=ctx, generation_mode=cx.GENERATION_MODE_PINNED_AT_TOKEN, token=old))
    assert count() == 2


def test_context_survives_reconnect_and_closes(server, client):
    sid = client.open(model=person_model())
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui")).context_id
    client.contexts.Insert(cx.ContextInsertRequest(context_id=ctx, inserts=[
        ob.Insert(temporary_id="a", entity="Person", values={"name": v("Ann")})]))
    ch = make_channel(server.address)
    try:
        other = Client(ch)
        assert other.contexts.GetState(cx.ContextRequest(context_id=ctx)).inserted_count == 1
        other.contexts.CloseContext(cx.ContextRequest(context_id=ctx))
    finally:
        ch.close()
    with pytest.raises(grpc.RpcError) as e:
        client.contexts.GetState(cx.ContextRequest(context_id=ctx))
    assert error_of(e.value)[0] == grpc.StatusCode.NOT_FOUND
    assert error_of(e.value)[2] == "CONTEXT_NOT_FOUND"


def test_migration_to_a_second_model_version(client):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann", "age": 30}])
    old_token = client.current(sid).token
    v2 = person_model("v2", extra_person_attrs=[md.Attribute(name="nickname", type=md.ATTRIBUTE_TYPE_STRING,
                                                             default_value=v("none"))])
    preview = client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=v2, dry_run=True))
    assert preview.dry_run and any("nickname" in s for s in preview.steps)
    assert "nickname" not in values(client.get(sid, [ann]).objects[0])
    r = client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=v2))
    assert r.from_version_hash and r.version_hash != r.from_version_hash
    client.save(sid, updates=[ob.Update(object_id=ann, values={"nickname": v("annie")})])
    got = client.fetch(sid, "Person", predicate='nickname == "annie"')
    assert [o.object_id for o in got.objects] == [ann]
    # a client still built with v1 cannot write any more
    old = Client(client.channel, metadata=[("ubiquity-model-version", r.from_version_hash)])
    with pytest.raises(grpc.RpcError) as e:
        old.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"name": v("Old")})])
    code, _, reason, _, _ = error_of(e.value)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and reason == "MODEL_VERSION_MISMATCH"
    # row history was collapsed by the migration: the pre-migration token has expired
    with pytest.raises(grpc.RpcError) as e:
        client.get(sid, [ann], token=old_token)
    assert error_of(e.value)[:1] == (grpc.StatusCode.FAILED_PRECONDITION,)
    assert error_of(e.value)[2] == "GENERATION_EXPIRED"


def test_incompatible_model_change_is_refused_and_changes_nothing(client):
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": "Ann", "age": 30}])
    bad = person_model("v2")
    bad.entities[0].attributes[1].type = md.ATTRIBUTE_TYPE_STRING        # age: int32 → string
    before = client.models.GetModel(md.GetModelRequest(store_id=sid)).version_hash
    with pytest.raises(grpc.RpcError) as e:
        client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=bad))
    code, message, reason, _, _ = error_of(e.value)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and reason == "MIGRATION_NOT_INFERABLE"
    assert "age" in message
    assert client.models.GetModel(md.GetModelRequest(store_id=sid)).version_hash == before


def test_export_baseline_at_token_equals_fetch_at_token(client, second):
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": f"P{i}", "age": i} for i in range(25)])
    token = client.current(sid).token
    second.insert_people(sid, [{"name": "Later"}])
    chunks = list(client.stores.ExportBaseline(st.ExportBaselineRequest(
        store_id=sid, at=ob.ReadGeneration(token=token), batch_size=10)))
    assert chunks[-1].last and chunks[-1].total == 25 and all(c.token == token for c in chunks)
    exported = {o.object_id: values(o) for c in chunks for o in c.objects}
    fetched = {o.object_id: values(o) for o in client.fetch(sid, "Person", token=token).objects}
    assert exported == fetched and len(exported) == 25


def test_fetch_stream_batches_on_one_generation(client, second):
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": f"P{i:02}", "age": i} for i in range(30)])
    stream = client.stores.FetchStream(st.FetchRequest(store_id=sid, fetch=ob.FetchSpec(
        entity="Person", fetch_batch_size=7, sort_descriptors=[ob.SortDescriptor(key_path="age")])))
    first = next(stream)
    second.insert_people(sid, [{"name": "Late", "age": -1}])       # must not appear
    batches = [first] + list(stream)
    assert [len(b.objects) for b in batches] == [7, 7, 7, 7, 2]
    assert len({b.token for b in batches}) == 1
    ages = [unpack(o.values["age"]) for b in batches for o in b.objects]
    assert ages == list(range(30))


def test_batch_insert_update_delete(client):
    sid = client.open(model=person_model())
    r = client.stores.BatchInsert(st.BatchInsertRequest(store_id=sid, entity="Person", return_object_ids=True, objects=[
        st.ObjectValues(values={"name": v(f"P{i}"), "age": v(i)}) for i in range(20)]))
    assert r.count == 20 and len(r.object_ids) == 20
    u = client.stores.BatchUpdate(st.BatchUpdateRequest(store_id=sid, entity="Person", predicate="age >= $min",
                                                        variables={"min": ob.Argument(value=v(15))}, values={"score": v(1.5)}))
    assert u.count == 5
    assert client.fetch(sid, "Person", predicate="score == 1.5", result_type=ob.RESULT_TYPE_COUNT).count == 5
    d = client.stores.BatchDelete(st.BatchDeleteRequest(store_id=sid, entity="Person", predicate="age < 10"))
    assert d.count == 10
    assert client.fetch(sid, "Person", result_type=ob.RESULT_TYPE_COUNT).count == 10


def test_seed_applies_once(client):
    sid = client.open(model=person_model())
    seed = [ob.Insert(temporary_id="s1", entity="Person", values={"name": v("Seed"), "email": v("seed@x")})]
    a = client.stores.Seed(st.SeedRequest(store_id=sid, seed_id="starter-v1", inserts=seed))
    b = client.stores.Seed(st.SeedRequest(store_id=sid, seed_id="starter-v1", inserts=seed))
    assert a.applied and not b.applied and a.permanent_ids["s1"] == b.permanent_ids["s1"]
    assert client.current(sid).generation == 1


def test_deduplicate(client):
    sid = client.open(model=person_model())
    ids = client.insert_people(sid, [{"name": "Ann", "age": 1}, {"name": "Ann", "age": 2}, {"name": "Bob", "age": 3}])
    r = client.stores.Deduplicate(st.DeduplicateRequest(store_id=sid, entity="Person", unique_key=["name"]))
    assert r.groups == 1 and r.removed == 1
    assert r.details[0].winner_object_id == ids[0] and list(r.details[0].removed_object_ids) == [ids[1]]
    assert client.fetch(sid, "Person", result_type=ob.RESULT_TYPE_COUNT).count == 2


def test_replace_store_gives_old_tokens_store_replaced(client):
    a = client.open(model=person_model())
    b = client.open(model=person_model())
    client.insert_people(a, [{"name": "A"}])
    client.insert_people(b, [{"name": "B1"}, {"name": "B2"}])
    old = client.current(a).token
    client.stores.ReplaceStore(st.ReplaceStoreRequest(store_id=a, source_store_id=b))
    assert names(client.fetch(a, "Person")) == ["B1", "B2"]
    with pytest.raises(grpc.RpcError) as e:
        client.get(a, [], token=old)
    assert error_of(e.value)[2] == "STORE_REPLACED"
    client.stores.DestroyStore(st.DestroyStoreRequest(store_id=b))
    with pytest.raises(grpc.RpcError) as e:
        client.current(b)
    assert error_of(e.value)[0] == grpc.StatusCode.NOT_FOUND


def test_store_lookup_memo_follows_store_switches_and_destroy(client):
    """The catalog remembers the last store ID text looked up (Catalog.store(idText:)): reads that
    alternate between stores, other spellings of an ID, a malformed ID and a destroyed store must
    answer exactly as without the memo."""
    a = client.open(model=person_model())
    b = client.open(model=person_model())
    [ann] = client.insert_people(a, [{"name": "Ann"}])
    [bob] = client.insert_people(b, [{"name": "Bob"}])
    for _ in range(3):
        assert [values(o)["name"] for o in client.get(a, [ann]).objects] == ["Ann"]
        assert [values(o)["name"] for o in client.get(b, [bob]).objects] == ["Bob"]
        assert [o.object_id for o in client.get(a.upper(), [ann]).objects] == [ann]
        # an ID of the other store is refused, whichever store was looked up last
        with pytest.raises(grpc.RpcError) as e:
            client.get(a, [bob])
        assert error_of(e.value)[0] == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        client.get(a[:-1] + "x", [ann])
    assert error_of(e.value)[2] == "BAD_STORE_ID"
    client.get(a, [ann])  # a is the last store found
    client.stores.DestroyStore(st.DestroyStoreRequest(store_id=a))
    with pytest.raises(grpc.RpcError) as e:
        client.get(a, [ann])
    assert error_of(e.value)[:3:2] == (grpc.StatusCode.NOT_FOUND, "STORE_NOT_FOUND")
    assert [values(o)["name"] for o in client.get(b, [bob]).objects] == ["Bob"]


def test_import_store_keeps_relationships(client):
    src = client.open(model=person_model())
    dst = client.open(model=person_model())
    r = client.save(src, inserts=[
        ob.Insert(temporary_id="p", entity="Person", values={"name": v("Ann")}),
        ob.Insert(temporary_id="n", entity="Note", values={"title": v("hello")},
                  relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(temporary_id="p")])}),
    ])
    imp = client.stores.ImportStore(st.ImportStoreRequest(store_id=dst, source_store_id=src))
    assert imp.imported == 2
    new_note = imp.object_id_map[r.permanent_ids["n"]]
    new_person = imp.object_id_map[r.permanent_ids["p"]]
    note = client.get(dst, [new_note]).objects[0]
    assert list(note.relationships["owner"].object_ids) == [new_person]


# -- bad input (SPEC §5): the right code, a clear message, nothing written ---------------------

def test_bad_inputs_change_nothing(client):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann", "age": 30}])
    gen = client.current(sid).generation

    def expect(call, code, reason=None, field=None, contains=None):
        with pytest.raises(grpc.RpcError) as e:
            call()
        got_code, message, got_reason, violations, _ = error_of(e.value)
        assert got_code == code, message
        if reason:
            assert got_reason == reason, (got_reason, message)
        if field:
            assert any(field in fv.field for fv in violations), violations
        if contains:
            assert contains in message, message
        return message

    # unknown and malformed stores
    expect(lambda: client.current(str(uuid.uuid4())), grpc.StatusCode.NOT_FOUND, "STORE_NOT_FOUND")
    expect(lambda: client.current("not-a-uuid"), grpc.StatusCode.INVALID_ARGUMENT, "BAD_STORE_ID", "store_id")
    # unknown entity, wrong type, missing required value
    expect(lambda: client.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Nope", values={"name": v("x")})]),
           grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED")
    expect(lambda: client.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"name": v("x"), "age": v("old")})]),
           grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED", contains="age")
    expect(lambda: client.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"age": v(3)})]),
           grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED", contains="name")
    # malformed object IDs, tokens and values
    expect(lambda: client.save(sid, deletes=[ob.Delete(object_id="p1")]), grpc.StatusCode.INVALID_ARGUMENT, "BAD_OBJECT_ID", "deletes[0]")
    expect(lambda: client.get(sid, [ann], token=b"\x01garbage"), grpc.StatusCode.INVALID_ARGUMENT, "BAD_TOKEN", "at.token")
    expect(lambda: client.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person",
                                                       values={"name": v("x"), "score": ob.Value(uuid_value="zzz")})]),
           grpc.StatusCode.INVALID_ARGUMENT, "BAD_VALUE")
    # a token of another store
    other = client.open(model=person_model())
    expect(lambda: client.get(sid, [ann], token=client.current(other).token), grpc.StatusCode.INVALID_ARGUMENT)
    # predicate errors carry their position
    msg = expect(lambda: client.fetch(sid, "Person", predicate="age == "), grpc.StatusCode.INVALID_ARGUMENT,
                 "PREDICATE_SYNTAX", "fetch.predicate")
    assert "column" in msg
    expect(lambda: client.fetch(sid, "Person", predicate="salary > 3"), grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_KEY_PATH")
    expect(lambda: client.fetch(sid, "Person", predicate="name == 'x'; ATTACH DATABASE 'y' AS z"), grpc.StatusCode.INVALID_ARGUMENT)
    expect(lambda: client.fetch(sid, "Nope"), grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_ENTITY")
    expect(lambda: client.fetch(sid, "Person", predicate="(" * 500 + "age == 1" + ")" * 500), grpc.StatusCode.INVALID_ARGUMENT)
    # oversized requests
    expect(lambda: client.save(sid, inserts=[ob.Insert(temporary_id=f"x{i}", entity="Person", values={"name": v("x")})
                                             for i in range(10_001)]),
           grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED")
    # a model version the store is not at
    stale = Client(client.channel, metadata=[("ubiquity-model-version", "0" * 64)])
    expect(lambda: stale.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"name": v("x")})]),
           grpc.StatusCode.FAILED_PRECONDITION, "MODEL_VERSION_MISMATCH")
    # contexts: unknown ID, bad mode token
    expect(lambda: client.contexts.GetState(cx.ContextRequest(context_id=str(uuid.uuid4()))), grpc.StatusCode.NOT_FOUND, "CONTEXT_NOT_FOUND")
    expect(lambda: client.contexts.CreateContext(cx.CreateContextRequest(
        store_id=sid, generation_mode=cx.GENERATION_MODE_PINNED_AT_TOKEN)), grpc.StatusCode.INVALID_ARGUMENT, "MISSING_FIELD")
    # nothing was written by any of it
    assert client.current(sid).generation == gen
    assert names(client.fetch(sid, "Person")) == ["Ann"]


def test_reflection_lists_every_data_method(channel):
    from ubiq_gen.grpc.reflection.v1 import reflection_pb2 as rp, reflection_pb2_grpc as rpg
    stub = rpg.ServerReflectionStub(channel)
    reqs = [rp.ServerReflectionRequest(list_services="")]
    services = [s.name for r in stub.ServerReflectionInfo(iter(reqs)) for s in r.list_services_response.service]
    for name in ("ubiquity.v1.Models", "ubiquity.v1.Stores", "ubiquity.v1.Contexts"):
        assert name in services
    from google.protobuf import descriptor_pb2
    reqs = [rp.ServerReflectionRequest(file_containing_symbol=s) for s in ("ubiquity.v1.Stores", "ubiquity.v1.Contexts", "ubiquity.v1.Models")]
    methods = {}
    for r in stub.ServerReflectionInfo(iter(reqs)):
        for raw in r.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
            for svc in fd.service:
                methods[svc.name] = {m.name for m in svc.method}
    assert methods["Models"] == {"RegisterModel", "GetModel"}
    assert methods["Stores"] == {"OpenStore", "ListStores", "Fetch", "FetchStream", "GetObjects", "Save", "BatchInsert",
                                 "BatchUpdate", "BatchDelete", "CurrentGeneration", "Deduplicate", "Seed",
                                 "ExportBaseline", "ImportStore", "DestroyStore", "ReplaceStore"}
    assert methods["Contexts"] == {"CreateContext", "Fetch", "Insert", "Update", "Delete", "Save", "Rollback", "Reset",
                                   "Refresh", "SetQueryGeneration", "GetState", "CloseContext"}


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff",                 # field 31, wire type 7: no such wire type
    b"\x0a\xff\xff\xff\xff\x0f",         # length-delimited field longer than the message
    b"\x12\x05\x0a\x03ab",               # inserts: an embedded message cut short
], ids=["bad-wire-type", "overlong-length", "truncated-insert"])
@pytest.mark.parametrize("method", ["Save", "Fetch", "GetObjects"])
def test_undecodable_data_requests_invalid_argument_and_change_nothing(client, method, garbage):
    """Save, Fetch and GetObjects read their request bytes by hand (with SwiftProtobuf as the
    fallback), not through the router's decode: bytes neither can read get INVALID_ARGUMENT,
    nothing is written, and the store keeps answering."""
    sid = client.open(model=person_model())
    [ann] = client.insert_people(sid, [{"name": "Ann"}])
    before = client.fetch(sid, "Person")
    call = client.channel.unary_unary(f"/ubiquity.v1.Stores/{method}")  # raw bytes on the wire
    with pytest.raises(grpc.RpcError) as e:
        call(garbage, timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "could not decode request" in e.value.details()
    after = client.fetch(sid, "Person")
    assert names(after) == names(before) == ["Ann"]
    assert after.token == before.token  # no save happened: the generation did not move
    assert [values(o)["name"] for o in client.get(sid, [ann]).objects] == ["Ann"]
