"""Issue 15 (robustness), the semantic defects: bad input gets the right status at once, with
bounded work, and contexts show what a save would store. Real ubiquityd, stock grpcio."""

from __future__ import annotations

import uuid

import grpc
import pytest

from ubiq_client import cx, error_of, md, ob, person_model, st, unpack, v, values


def ref(object_id: str) -> ob.ObjectRefList:
    return ob.ObjectRefList(refs=[ob.ObjectRef(object_id=object_id)])


def failure(call):
    with pytest.raises(grpc.RpcError) as e:
        call()
    return error_of(e.value)


def typed_model() -> md.Model:
    A, T = md.Attribute, md
    return person_model(extra_person_attrs=[A(name="ratio", type=T.ATTRIBUTE_TYPE_FLOAT),
                                            A(name="small", type=T.ATTRIBUTE_TYPE_INT16)])


# item 3: BatchUpdate checks its values against the model once, before touching objects

def test_batch_update_with_unknown_attributes_fails_fast_with_a_bounded_list(client):
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": f"P{i}", "age": i} for i in range(10)])
    bad = {f"nope{i:05d}": v(1) for i in range(5000)}
    for predicate in ("", "age > 1000"):  # ten matching objects, then none: the same answer
        code, message, reason, violations, _ = failure(lambda: client.stores.BatchUpdate(
            st.BatchUpdateRequest(store_id=sid, entity="Person", predicate=predicate, values=bad), timeout=30))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED"), message
        assert "5000 issues" in message and "the first 20 are listed" in message
        assert len(violations) == 20
        assert all(x.field.startswith("values.nope") for x in violations)
    # a wrong type with nothing matching is refused too
    code, _, reason, violations, _ = failure(lambda: client.stores.BatchUpdate(
        st.BatchUpdateRequest(store_id=sid, entity="Person", predicate="age > 1000", values={"age": v("old")}), timeout=30))
    assert (code, reason, [x.field for x in violations]) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED", ["values.age"])
    assert client.fetch(sid, "Person", "age >= 0").objects[0].version == 1  # nothing changed


# item 7: a clash stays a clash when another insert points at the clashing object

def test_constraint_clash_reported_when_a_note_points_at_the_clashing_person(client):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann", "email": "ann@x"}])
    person = ob.Insert(temporary_id="p", entity="Person", values={"name": v("Ann 2"), "email": v("ann@x")})
    note = ob.Insert(temporary_id="n", entity="Note", values={"title": v("hi")},
                     relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(temporary_id="p")])})
    code, message, reason, _, conflicts = failure(lambda: client.save(sid, inserts=[person, note]))
    assert (code, reason) == (grpc.StatusCode.ABORTED, "CONSTRAINT_CONFLICT"), message
    assert [c.object_id for c in conflicts.conflicts] == [ann]
    assert client.fetch(sid, "Note").objects == []


# item 9: tokens of a destroyed store, and of another store

def test_token_of_a_destroyed_and_recreated_store_is_store_replaced(client):
    name = f"epoch-{uuid.uuid4()}"
    old = client.open(name=name, model=person_model())
    client.insert_people(old, [{"name": "Ann"}])
    token = client.current(old).token
    client.stores.DestroyStore(st.DestroyStoreRequest(store_id=old), timeout=30)
    new = client.open(name=name, model=person_model())
    code, message, reason, _, _ = failure(lambda: client.fetch(new, "Person", token=token))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_REPLACED"), message
    code, _, reason, _, _ = failure(lambda: client.contexts.CreateContext(cx.CreateContextRequest(
        store_id=new, generation_mode=cx.GENERATION_MODE_PINNED_AT_TOKEN, token=token), timeout=30))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_REPLACED")
    # a live store's token in another store is BAD_TOKEN
    other = client.open(model=person_model())
    code, _, reason, _, _ = failure(lambda: client.fetch(new, "Person", token=client.current(other).token))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_TOKEN")


# item 10: contexts check values when they are given; out-of-range values fail everywhere

def context(client, sid) -> str:
    return client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid), timeout=30).context_id


def test_context_insert_and_update_refuse_wrong_types_at_once(client):
    sid = client.open(model=typed_model())
    cid = context(client, sid)
    code, message, reason, violations, _ = failure(lambda: client.contexts.Insert(cx.ContextInsertRequest(context_id=cid, inserts=[
        ob.Insert(temporary_id="a", entity="Person", values={"name": v("Ann")}),
        ob.Insert(temporary_id="b", entity="Person", values={"name": v("Bob"), "age": v("forty")})]), timeout=30))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED"), message
    assert [x.field for x in violations] == ["inserts[1].values.age"]
    fetched = client.contexts.Fetch(cx.ContextFetchRequest(context_id=cid, fetch=ob.FetchSpec(entity="Person")), timeout=30)
    assert fetched.objects == []  # nothing of the refused call entered the context
    (ann,) = client.insert_people(sid, [{"name": "Ann"}])
    code, _, reason, violations, _ = failure(lambda: client.contexts.Update(cx.ContextUpdateRequest(context_id=cid, updates=[
        ob.Update(object_id=ann, values={"small": v(40000)})]), timeout=30))
    assert (code, reason, [x.field for x in violations]) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED", ["updates[0].values.small"])


@pytest.mark.parametrize("attr,value", [("ratio", 1e300), ("ratio", -1e39), ("small", 40000), ("small", -32769), ("age", 2**31)])
def test_out_of_range_values_fail_in_every_write_path(client, attr, value):
    sid = client.open(model=typed_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann"}])
    cid = context(client, sid)
    bad = {attr: v(value)}
    calls = {
        "Save": lambda: client.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"name": v("X"), **bad})]),
        "Save update": lambda: client.save(sid, updates=[ob.Update(object_id=ann, values=bad)]),
        "BatchInsert": lambda: client.stores.BatchInsert(st.BatchInsertRequest(store_id=sid, entity="Person", objects=[
            st.ObjectValues(values={"name": v("X"), **bad})]), timeout=30),
        "BatchUpdate": lambda: client.stores.BatchUpdate(st.BatchUpdateRequest(store_id=sid, entity="Person", values=bad), timeout=30),
        "Contexts.Insert": lambda: client.contexts.Insert(cx.ContextInsertRequest(context_id=cid, inserts=[
            ob.Insert(temporary_id="x", entity="Person", values={"name": v("X"), **bad})]), timeout=30),
        "Contexts.Update": lambda: client.contexts.Update(cx.ContextUpdateRequest(context_id=cid, updates=[
            ob.Update(object_id=ann, values=bad)]), timeout=30),
    }
    for name, call in calls.items():
        code, message, reason, violations, _ = failure(call)
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED"), f"{name}: {message}"
        assert any(x.reason == "outOfRange" for x in violations), f"{name}: {violations}"
    assert [values(o) for o in client.get(sid, [ann]).objects] == [{"name": "Ann", "age": None, "email": None, "score": None,
                                                                    "ratio": None, "small": None}]


# item 11: a context's view keeps both sides of a relationship in step before Save

def test_context_fetch_sees_the_inverse_side_of_pending_relationship_changes(client):
    sid = client.open(model=person_model())
    carol, dave = client.insert_people(sid, [{"name": "Carol"}, {"name": "Dave"}])
    saved = client.save(sid, inserts=[ob.Insert(temporary_id="old", entity="Note", values={"title": v("old")},
                                                 relationships={"owner": ref(dave)})])
    old_note = saved.permanent_ids["old"]
    cid = context(client, sid)

    def fetch(entity, predicate=""):
        return client.contexts.Fetch(cx.ContextFetchRequest(context_id=cid, fetch=ob.FetchSpec(entity=entity, predicate=predicate)), timeout=30)

    def notes_of(person):
        (o,) = [o for o in fetch("Person").objects if o.object_id == person]
        return sorted(o.relationships["notes"].object_ids)

    ins = client.contexts.Insert(cx.ContextInsertRequest(context_id=cid, inserts=[
        ob.Insert(temporary_id="n", entity="Note", values={"title": v("hello")}, relationships={"owner": ref(carol)})]), timeout=30)
    new_note = ins.object_ids["n"]
    assert notes_of(carol) == [new_note]
    assert [unpack(o.values["name"]) for o in fetch("Person", 'ANY notes.title == "hello"').objects] == ["Carol"]
    # moving the stored note from Dave to Carol: Dave loses it, Carol gains it
    client.contexts.Update(cx.ContextUpdateRequest(context_id=cid, updates=[ob.Update(object_id=old_note, relationships={"owner": ref(carol)})]), timeout=30)
    assert notes_of(carol) == sorted([new_note, old_note])
    assert notes_of(dave) == []
    assert [unpack(o.values["name"]) for o in fetch("Person", "notes.@count == 0").objects] == ["Dave"]
    # editing the to-many side sets the to-one side
    client.contexts.Update(cx.ContextUpdateRequest(context_id=cid, updates=[
        ob.Update(object_id=dave, relationships={"notes": ob.ObjectRefList(refs=[ob.ObjectRef(object_id=new_note)])})]), timeout=30)
    owners = {o.object_id: list(o.relationships["owner"].object_ids) for o in fetch("Note").objects}
    assert owners == {new_note: [dave], old_note: [carol]}
    assert notes_of(carol) == [old_note]
    # a pending delete leaves the other side
    client.contexts.Delete(cx.ContextDeleteRequest(context_id=cid, object_ids=[old_note]), timeout=30)
    assert notes_of(carol) == []
    # and the save stores what the context showed
    saved = client.contexts.Save(cx.ContextSaveRequest(context_id=cid), timeout=30)
    stored = {unpack(o.values["name"]): list(o.relationships["notes"].object_ids) for o in client.fetch(sid, "Person").objects}
    assert stored == {"Carol": [], "Dave": [saved.result.permanent_ids[new_note]]}


def test_updates_and_deletes_of_pending_inserts_are_saved_from_the_context_and_from_a_child(client):
    # Contexts.Update on an insert's temporary ID answered OK and dropped the change, in the
    # inserting context and in a child (the C client's scenario found it)
    sid = client.open(model=person_model())
    (carol,) = client.insert_people(sid, [{"name": "Carol"}])
    cid = context(client, sid)
    ins = client.contexts.Insert(cx.ContextInsertRequest(context_id=cid, inserts=[
        ob.Insert(temporary_id="a", entity="Note", values={"title": v("draft a")}),
        ob.Insert(temporary_id="b", entity="Note", values={"title": v("draft b")}),
        ob.Insert(temporary_id="c", entity="Note", values={"title": v("draft c")})]), timeout=30)
    a, b, c = ins.object_ids["a"], ins.object_ids["b"], ins.object_ids["c"]
    client.contexts.Update(cx.ContextUpdateRequest(context_id=cid, updates=[
        ob.Update(object_id=a, values={"title": v("final a")}, relationships={"owner": ref(carol)})]), timeout=30)
    child = client.contexts.CreateContext(cx.CreateContextRequest(parent_context_id=cid), timeout=30).context_id
    client.contexts.Update(cx.ContextUpdateRequest(context_id=child, updates=[
        ob.Update(object_id=b, values={"title": v("final b")})]), timeout=30)
    client.contexts.Delete(cx.ContextDeleteRequest(context_id=child, object_ids=[c]), timeout=30)

    def titles(context_id):
        got = client.contexts.Fetch(cx.ContextFetchRequest(context_id=context_id, fetch=ob.FetchSpec(entity="Note")), timeout=30)
        return sorted(unpack(o.values["title"]) for o in got.objects)

    assert titles(child) == ["final a", "final b"]
    assert titles(cid) == ["draft b", "draft c", "final a"], "the parent sees the child's changes only once it saves"
    client.contexts.Save(cx.ContextSaveRequest(context_id=child), timeout=30)
    assert titles(cid) == ["final a", "final b"]
    saved = client.contexts.Save(cx.ContextSaveRequest(context_id=cid), timeout=30)
    stored = {unpack(o.values["title"]): list(o.relationships["owner"].object_ids) for o in client.fetch(sid, "Note").objects}
    assert stored == {"final a": [carol], "final b": []}
    assert set(saved.result.permanent_ids) == {a, b}


# also: NO_MODEL on every write path, request paths in save issues, a column stated once

def test_writes_into_a_store_without_a_model_are_no_model(client):
    sid = client.open()
    calls = {
        "Save": lambda: client.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"name": v("X")})]),
        "BatchInsert": lambda: client.stores.BatchInsert(st.BatchInsertRequest(store_id=sid, entity="Person", objects=[
            st.ObjectValues(values={"name": v("X")})]), timeout=30),
        "BatchUpdate": lambda: client.stores.BatchUpdate(st.BatchUpdateRequest(store_id=sid, entity="Person", values={"name": v("X")}), timeout=30),
        "BatchDelete": lambda: client.stores.BatchDelete(st.BatchDeleteRequest(store_id=sid, entity="Person"), timeout=30),
        "Fetch": lambda: client.fetch(sid, "Person"),
    }
    for name, call in calls.items():
        code, message, reason, _, _ = failure(call)
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "NO_MODEL"), f"{name}: {code} {reason} {message}"


def test_save_issues_name_request_fields(client):
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann"}])
    code, message, reason, violations, _ = failure(lambda: client.save(sid, inserts=[
        ob.Insert(temporary_id="a", entity="Person", values={"name": v("A")}),
        ob.Insert(temporary_id="b", entity="Person", values={"name": v("B")}),
        ob.Insert(temporary_id="c", entity="Person", values={"age": v("x")}),
    ], updates=[ob.Update(object_id=ann, values={"nope": v(1)})]))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED"), message
    assert sorted(x.field for x in violations) == ["inserts[2].values.age", "inserts[2].values.name", "updates[0].values.nope"]


def test_predicate_error_states_its_column_once(client):
    sid = client.open(model=person_model())
    code, message, reason, violations, _ = failure(lambda: client.fetch(sid, "Person", "age >"))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "PREDICATE_SYNTAX")
    assert message.count("at column") == 1, message
    assert violations[0].description.count("at column") == 1, violations[0].description


# item 8: migrations in quick succession each get their own backup

def test_two_migrations_in_the_same_second_both_succeed(client):
    A = md.Attribute
    sid = client.open(model=person_model("v1"))
    client.insert_people(sid, [{"name": "Ann"}])
    for i, extra in enumerate(["nick", "title"]):
        attrs = [A(name=n, type=md.ATTRIBUTE_TYPE_STRING) for n in ["nick", "title"][: i + 1]]
        r = client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model(f"v{i + 2}", attrs)), timeout=60)
        assert not r.unchanged and r.version_hash, extra


def test_batch_insert_and_context_save_issues_name_their_own_request(client):
    sid = client.open(model=person_model())
    code, message, reason, violations, _ = failure(lambda: client.stores.BatchInsert(st.BatchInsertRequest(
        store_id=sid, entity="Person", objects=[st.ObjectValues(values={"name": v("A")}),
                                                st.ObjectValues(values={"age": v(3)})]), timeout=30))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED"), message
    assert [x.field for x in violations] == ["objects[1].values.name"]
    # a context's save: its changes are not in the request, so issues name their object instead
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui")).context_id
    client.contexts.Insert(cx.ContextInsertRequest(context_id=ctx, inserts=[
        ob.Insert(temporary_id="t", entity="Person", values={"age": v(3)})]))
    code, message, reason, violations, _ = failure(lambda: client.contexts.Save(cx.ContextSaveRequest(context_id=ctx)))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VALIDATION_FAILED"), message
    assert len(violations) == 1 and not violations[0].field.startswith("inserts[")
    assert violations[0].field.endswith("name")
