"""Live queries on the feed (docs/changes.md "Live queries") against a real ubiquityd: typed
`LiveQueryUpdate`s saying which objects entered, changed inside or left a predicate's result set,
in order, that rebuild the result set a fetch sees — sync and asyncio — and a predicate that does
not check refused as a typed error."""

from __future__ import annotations

import asyncio

import pytest

import ubiq_harness
import ubiquity
import ubiquity.aio
from conftest import person_model
from ubiquity import LiveQuery, LiveQueryUpdate

ADULTS = LiveQuery("Person", "age >= $min", {"min": 30})


def applied(members: dict[str, int], u: LiveQueryUpdate) -> dict[str, int]:
    """The result set (ID → age) after the update."""
    out = dict(members)
    for o in u.entered + u.changed:
        assert o.object is not None  # include_values
        out[o.object_id] = int(o.object["age"])  # type: ignore[arg-type]
    for i in u.left_object_ids:
        del out[i]
    return out


def fetched(store: ubiquity.Store, at: bytes) -> dict[str, int]:
    r = store.fetch("Person", ADULTS.predicate, ADULTS.arguments, at=at)
    return {o.id: int(o["age"]) for o in r.objects}  # type: ignore[arg-type]


def test_a_live_query_reports_what_entered_changed_and_left(store: ubiquity.Store) -> None:
    before = store.save(inserts={"old": ("Person", {"name": "Olga", "age": 70})})
    feed = store.changes(live_query=ADULTS, include_values=True)
    old = before.permanent_ids["old"]

    ann = store.save(inserts={"a": ("Person", {"name": "Ann", "age": 40})}).permanent_ids["a"]
    bob = store.save(inserts={"b": ("Person", {"name": "Bob", "age": 20})}).permanent_ids["b"]  # not a member
    store.save(updates={bob: {"age": 35}})   # Bob enters
    store.save(updates={ann: {"age": 45}})   # Ann changes inside the set
    store.save(updates={ann: {"age": 10}})   # Ann leaves
    last = store.save(deletes=[bob])         # Bob leaves
    updates = feed.live_query_updates()
    got = [next(updates) for _ in range(5)]
    shape = [([o.object_id for o in u.entered], [o.object_id for o in u.changed], u.left_object_ids) for u in got]
    assert shape == [([ann], [], []), ([bob], [], []), ([], [ann], []), ([], [], [ann]), ([], [], [bob])]
    assert got[0].entered[0].object is not None and got[0].entered[0].object["name"] == "Ann"
    assert got[-1].generation == last.generation and got[-1].token == last.token
    assert [u.generation for u in got] == sorted(u.generation for u in got)

    # the updates, applied to the set at the start, give the set a fetch sees at each token
    members = fetched(store, before.token)
    assert members == {old: 70}
    for u in got:
        members = applied(members, u)
        assert members == fetched(store, u.token)
    feed.close()


def test_a_live_query_that_does_not_check_is_a_typed_error(store: ubiquity.Store) -> None:
    feed = store.changes(live_query=LiveQuery("Person", "shoe_size > 3"))
    with pytest.raises(ubiquity.InvalidArgumentError) as e:
        next(feed)
    assert e.value.reason == "UNKNOWN_KEY_PATH"


def test_the_asyncio_live_query(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key, device_id="aio-live") as c:
            store = await c.open_store("live")
            await store.register_model(person_model())
            feed = await store.changes(live_query=ADULTS)
            ann = (await store.save(inserts={"a": ("Person", {"name": "Ann", "age": 40})})).permanent_ids["a"]
            await store.save(updates={ann: {"age": 5}})
            updates = feed.live_query_updates()
            entered, left = await updates.__anext__(), await updates.__anext__()
            assert [(o.object_id, o.object) for o in entered.entered] == [(ann, None)]  # no values asked
            assert left.left_object_ids == [ann] and left.generation > entered.generation
            feed.close()

    asyncio.run(scenario())
