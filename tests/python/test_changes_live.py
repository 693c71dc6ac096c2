"""Live queries (issue 17, docs/changes.md "Live queries"): Subscribe with a `live_query` reports
each transaction's effect on a predicate's result set, against the real ubiquityd over TCP.

The invariant checked: the result set of a fetch at the start token, with every update applied
(entered / changed add or replace, left removes), equals a fetch at the last update's token.
"""

from __future__ import annotations

import random

import grpc
import pytest

from test_changes import Stream
from ubiq_client import error_of, ob, person_model, v
from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import models_pb2 as md

PREDICATE = "age >= $lo AND age < $hi"
ARGS = {"lo": ob.Argument(value=v(20)), "hi": ob.Argument(value=v(60))}


def live(channel, sid, token=None, include_values=True, predicate=PREDICATE, arguments=None, entity="Person") -> Stream:
    q = ch.LiveQuery(entity=entity, predicate=predicate, arguments=ARGS if arguments is None else arguments)
    frm = ch.StartPoint(token=token) if token is not None else ch.StartPoint(now=True)
    # `from` is a Python keyword: passed by name through a dict
    return Stream(channel, ch.SubscribeRequest(store_id=sid, live_query=q, filter=ch.ChangeFilter(include_values=include_values),
                                               **{"from": frm}))


def ages(objects) -> dict:
    return {o.object_id: o.values["age"] for o in objects}


def apply_until(stream: Stream, view: dict, generation: int) -> dict:
    """Applies the stream's live-query updates to `view` until its resume token reaches
    `generation`; returns the view."""
    while True:
        r = stream.next()
        if r.WhichOneof("event") == "live_query":
            u = r.live_query
            assert u.generation == r.resume_generation
            assert u.entered or u.changed or u.left_object_ids, "an update with nothing in it"
            for o in list(u.entered) + list(u.changed):
                assert o.HasField("object") and o.object.object_id == o.object_id
                view[o.object_id] = o.object.values["age"]
            for oid in u.left_object_ids:
                assert oid in view, f"{oid} left without being in the set"
                del view[oid]
        if r.resume_generation >= generation:
            return view


def workload(client, sid, rng: random.Random, steps: int) -> int:
    """Seeded saves: inserts, updates moving objects into and out of [20, 60), deletes; returns
    the last save's generation."""
    alive: list[str] = []
    last = None
    for step in range(steps):
        kind = rng.choice(["insert", "update", "update", "delete"]) if alive else "insert"
        if kind == "insert":
            n = rng.randint(1, 3)
            ids = client.insert_people(sid, [{"name": f"s{step}-{i}", "age": rng.randint(0, 80)} for i in range(n)])
            alive += ids
            last = client.current(sid)  # insert_people returns only the IDs
        elif kind == "update":
            chosen = rng.sample(alive, min(len(alive), rng.randint(1, 3)))
            last = client.save(sid, updates=[ob.Update(object_id=o, values={"age": v(rng.randint(0, 80))}) for o in chosen])
        else:
            victim = alive.pop(rng.randrange(len(alive)))
            last = client.save(sid, deletes=[ob.Delete(object_id=victim)])
    return last.generation


def fetch_view(client, sid, token) -> dict:
    r = client.fetch(sid, "Person", PREDICATE, token=token, variables=ARGS)
    return ages(r.objects)


@pytest.fixture
def store(client):
    return client.open(model=person_model())


def test_live_query_updates_applied_to_a_baseline_equal_the_current_result_set(client, store):
    client.insert_people(store, [{"name": f"b{i}", "age": i * 10} for i in range(8)])
    start = client.current(store)
    view = fetch_view(client, store, start.token)
    assert len(view) == 4  # ages 20, 30, 40, 50
    s = live(client.channel, store, token=start.token)
    try:
        end = workload(client, store, random.Random(17), 40)
        view = apply_until(s, view, end)
        now = client.current(store)
        assert now.generation == end
        assert view == fetch_view(client, store, now.token)
    finally:
        s.cancel()


def test_resume_from_a_token_mid_way_reaches_the_same_set(client, store):
    start = client.current(store)
    s = live(client.channel, store, token=start.token)
    try:
        end = workload(client, store, random.Random(5), 30)
        responses = s.until(lambda r: r.resume_generation >= end)
    finally:
        s.cancel()
    mid = next(r for r in responses[len(responses) // 2:] if r.WhichOneof("event") == "live_query")
    view = fetch_view(client, store, mid.resume_token)
    resumed = live(client.channel, store, token=mid.resume_token)
    try:
        view = apply_until(resumed, view, end)
    finally:
        resumed.cancel()
    assert view == fetch_view(client, store, client.current(store).token)


def test_each_kind_of_update_and_the_caught_up_marker(client, store):
    a, b = client.insert_people(store, [{"name": "a", "age": 10}, {"name": "b", "age": 30}])
    s = live(client.channel, store, include_values=False)
    try:
        s.caught_up()
        r1 = client.save(store, updates=[ob.Update(object_id=a, values={"age": v(25)})])  # enters
        r2 = client.save(store, updates=[ob.Update(object_id=b, values={"name": v("bee")})])  # changes inside
        r3 = client.save(store, updates=[ob.Update(object_id=a, values={"age": v(70)})])  # leaves
        r4 = client.save(store, updates=[ob.Update(object_id=a, values={"age": v(71)})])  # outside: nothing
        r5 = client.save(store, deletes=[ob.Delete(object_id=b)])  # leaves by deletion
        got = [r.live_query for r in s.until(lambda r: r.resume_generation >= r5.generation)
               if r.WhichOneof("event") == "live_query"]
        assert [u.generation for u in got] == [r1.generation, r2.generation, r3.generation, r5.generation]
        assert [o.object_id for o in got[0].entered] == [a] and not got[0].entered[0].HasField("object")
        assert [o.object_id for o in got[1].changed] == [b]
        assert list(got[2].left_object_ids) == [a]
        assert list(got[3].left_object_ids) == [b]
        assert r4.generation not in [u.generation for u in got]
    finally:
        s.cancel()


@pytest.mark.parametrize("query, field, reason", [
    (ch.LiveQuery(entity="Person", predicate="age >"), "live_query.predicate", "PREDICATE_SYNTAX"),
    (ch.LiveQuery(entity="Person", predicate="shoeSize == 3"), "live_query.predicate", "UNKNOWN_KEY_PATH"),
    (ch.LiveQuery(entity="Person", predicate="age > $x"), "live_query.predicate", "UNBOUND_VARIABLE"),
    (ch.LiveQuery(entity="Nobody", predicate=""), "live_query.entity", "UNKNOWN_ENTITY"),
])
def test_bad_live_queries_are_refused_and_the_server_keeps_serving(client, store, query, field, reason):
    call = Stream(client.channel, ch.SubscribeRequest(store_id=store, live_query=query))
    err = call.ended.get(timeout=30)
    assert err is not None
    code, message, got_reason, violations, _ = error_of(err)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert got_reason == reason, message
    assert message.startswith(field), message
    if reason == "PREDICATE_SYNTAX":
        assert "column" in message, message
    assert client.current(store).generation >= 0


def test_live_query_with_filter_entities_is_refused(client, store):
    call = Stream(client.channel, ch.SubscribeRequest(store_id=store, live_query=ch.LiveQuery(entity="Person"),
                                                      filter=ch.ChangeFilter(entities=["Person"])))
    code, message, reason, _, _ = error_of(call.ended.get(timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and reason == "INVALID_ARGUMENT" and "filter.entities" in message


def test_a_key_path_through_a_relationship_is_read_at_each_side(client, store):
    old, young = client.insert_people(store, [{"name": "old", "age": 40}, {"name": "young", "age": 10}])

    def note(tid, owner):
        return ob.Insert(temporary_id=tid, entity="Note", values={"title": v(tid)},
                         relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(object_id=owner)])})

    s = live(client.channel, store, predicate="owner.age >= 30", arguments={}, entity="Note", include_values=False)
    try:
        s.caught_up()
        r1 = client.save(store, inserts=[note("n1", old), note("n2", young)])
        n1, n2 = r1.permanent_ids["n1"], r1.permanent_ids["n2"]
        r2 = client.save(store, updates=[ob.Update(object_id=n2, relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(object_id=old)])})])
        r3 = client.save(store, deletes=[ob.Delete(object_id=old)])  # cascades to both notes
        got = [r.live_query for r in s.until(lambda r: r.resume_generation >= r3.generation)
               if r.WhichOneof("event") == "live_query"]
        assert [u.generation for u in got] == [r1.generation, r2.generation, r3.generation]
        assert [o.object_id for o in got[0].entered] == [n1]
        assert [o.object_id for o in got[1].entered] == [n2]
        assert sorted(got[2].left_object_ids) == sorted([n1, n2])
    finally:
        s.cancel()


def test_sub_entities_belong_to_their_parents_live_query(client):
    a = md.Attribute(name="legs", type=md.ATTRIBUTE_TYPE_INT32)
    model = md.Model(version_identifier="animals", entities=[
        md.Entity(name="Animal", attributes=[a]),
        md.Entity(name="Dog", parent="Animal", attributes=[md.Attribute(name="breed", type=md.ATTRIBUTE_TYPE_STRING)]),
        md.Entity(name="Rock", attributes=[md.Attribute(name="weight", type=md.ATTRIBUTE_TYPE_INT32)]),
    ])
    sid = client.open(model=model)
    s = live(client.channel, sid, predicate="legs == 4", arguments={}, entity="Animal")
    try:
        s.caught_up()
        r = client.save(sid, inserts=[ob.Insert(temporary_id="d", entity="Dog", values={"legs": v(4), "breed": v("lab")}),
                                      ob.Insert(temporary_id="b", entity="Animal", values={"legs": v(2)}),
                                      ob.Insert(temporary_id="r", entity="Rock", values={"weight": v(4)})])
        got = [x.live_query for x in s.until(lambda x: x.resume_generation >= r.generation) if x.WhichOneof("event") == "live_query"]
        assert len(got) == 1
        assert [o.object_id for o in got[0].entered] == [r.permanent_ids["d"]]
        assert got[0].entered[0].object.entity == "Dog" and got[0].entered[0].object.values["breed"] == v("lab")
    finally:
        s.cancel()
