"""The Stores calls beyond fetch and save, and KeyValue, through the sync client against a real
ubiquityd: each answer arrives typed, each failure as the typed error its reason names."""

from __future__ import annotations

import uuid

import pytest

import ubiquity
from conftest import person_model


def test_batch_calls_change_what_a_fetch_then_reads(store: ubiquity.Store) -> None:
    r = store.batch_insert("Person", [{"name": f"p{i}", "age": i} for i in range(5)], return_object_ids=True)
    assert r.count == 5 and len(r.object_ids) == 5 and r.token
    u = store.batch_update("Person", "age >= $min", {"min": 3}, values={"score": 1.5})
    assert u.count == 2
    assert sorted(o["name"] for o in store.fetch("Person", "score == 1.5")) == ["p3", "p4"]
    d = store.batch_delete("Person", object_ids=r.object_ids[:1])
    assert d.count == 1 and r.object_ids[0] not in store.get(r.object_ids)
    d = store.batch_delete("Person", "age < $n", {"n": 3})
    assert d.count == 2 and store.fetch("Person", result_type=ubiquity.ResultType.COUNT).count == 2
    with pytest.raises(ubiquity.InvalidArgumentError) as e:
        store.batch_update("Person", "age >", values={"age": 1})
    assert e.value.reason == "PREDICATE_SYNTAX"


def test_fetch_stream_pages_cover_one_generation(store: ubiquity.Store) -> None:
    store.batch_insert("Person", [{"name": f"p{i:03}", "age": i} for i in range(120)])
    pages = list(store.fetch_stream("Person", sort=["age"]))
    assert [o["age"] for p in pages for o in p] == list(range(120))
    assert len({p.token for p in pages}) == 1


def test_deduplicate_keeps_one_per_key(store: ubiquity.Store) -> None:
    store.batch_insert("Person", [{"name": "Ann"}, {"name": "Ann"}, {"name": "Ann"}, {"name": "Bob"}])
    r = store.deduplicate("Person", ["name"])
    assert (r.groups, r.removed) == (1, 2)
    assert len(r.details) == 1 and len(r.details[0].removed) == 2
    assert sorted(o["name"] for o in store.fetch("Person")) == ["Ann", "Bob"]


def test_seed_applies_once_per_seed_id(store: ubiquity.Store) -> None:
    first = store.seed("initial-v1", {"a": ("Person", {"name": "Ann"}), "b": ("Person", {"name": "Bob"})})
    again = store.seed("initial-v1", {"a": ("Person", {"name": "Ann"}), "b": ("Person", {"name": "Bob"})})
    assert first.applied and not again.applied
    assert again.permanent_ids == first.permanent_ids and set(first.permanent_ids) == {"a", "b"}
    assert len(store.fetch("Person")) == 2


def test_export_import_replace_and_destroy(client: ubiquity.Client, store: ubiquity.Store) -> None:
    saved = store.batch_insert("Person", [{"name": f"p{i}"} for i in range(7)])
    chunks = list(store.export_baseline(batch_size=3))
    assert [len(c.objects) for c in chunks] == [3, 3, 1] and chunks[-1].last and chunks[-1].total == 7
    assert {c.token for c in chunks} == {saved.token}

    copy = client.open_store(f"copy-{uuid.uuid4()}")
    copy.register_model(person_model())
    imported = copy.import_store(store)
    assert imported.imported == 7 and len(imported.object_id_map) == 7
    assert sorted(o["name"] for o in copy.fetch("Person")) == sorted(f"p{i}" for i in range(7))

    other = client.open_store(f"other-{uuid.uuid4()}")
    other.register_model(person_model())
    other.save(inserts={"z": ("Person", {"name": "Zed"})})
    before = copy.current_token()
    token = copy.replace_with(other)
    assert [o["name"] for o in copy.fetch("Person", at=token)] == ["Zed"]
    with pytest.raises(ubiquity.GenerationExpiredError):
        copy.fetch("Person", at=before)

    other.destroy()
    with pytest.raises(ubiquity.NotFoundError):
        other.current_token()
    assert other.id not in [s.id for s in client.list_stores()]


def test_key_values_compare_and_set(client: ubiquity.Client) -> None:
    kv = client.key_values
    prefix = f"t{uuid.uuid4().hex[:8]}."
    w = kv.set(prefix + "a", b"1", must_not_exist=True, author="dev1")
    assert w.version == 1 and w.feed_token
    with pytest.raises(ubiquity.KeyValueConflictError) as e:
        kv.set(prefix + "a", b"2", must_not_exist=True)
    assert e.value.exists and e.value.current_version == 1 and e.value.key == prefix + "a"
    assert kv.set(prefix + "a", b"2", expected_version=1).version == 2
    got = kv.get(prefix + "a")
    assert (got.value, got.version, got.author) == (b"2", 2, "")
    for i in range(3):
        kv.set(f"{prefix}k{i}", bytes([i]))
    page = kv.list(prefix, page_size=2)
    assert [x.key for x in page.entries] == [prefix + "a", prefix + "k0"] and page.next_page_token
    assert [x.key for x in kv.entries(prefix, keys_only=True)] == [prefix + "a"] + [f"{prefix}k{i}" for i in range(3)]
    assert page.usage.keys >= 4 and page.usage.max_keys > 0
    d = kv.delete(prefix + "a", expected_version=2)
    assert d.existed and d.version == 3
    with pytest.raises(ubiquity.NotFoundError) as nf:
        kv.get(prefix + "a")
    assert nf.value.reason == "KEY_NOT_FOUND"
    with pytest.raises(ubiquity.InvalidArgumentError) as bad:
        kv.set("a/b", b"")
    assert bad.value.reason == "BAD_KEY"
    with pytest.raises(ubiquity.KeyValueQuotaError) as q:
        kv.set(prefix + "big", b"x" * (page.usage.max_value_bytes + 1))
    assert q.value.quota == "value_bytes" and q.value.limit == page.usage.max_value_bytes
    with pytest.raises(ubiquity.NotFoundError):
        kv.get(prefix + "big")


def test_history_and_deletions_page_by_page(store: ubiquity.Store) -> None:
    ids = [store.save(inserts={"p": ("Person", {"name": f"p{i}", "age": i})}).permanent_ids["p"] for i in range(3)]
    first = store.history(page_size=2, include_values=True)
    assert [t.generation for t in first.transactions] == [1, 2] and first.has_more
    assert first.transactions[0].changes[0].values["name"] == "p0"
    rest = store.history(first.next_token, page_size=2)
    assert [t.generation for t in rest.transactions] == [3] and not rest.has_more
    assert rest.current_token == store.current_token()

    before = store.current_token()
    store.save(deletes=ids[:2])
    gone = store.deletions(before, page_size=1)
    assert len(gone.deletions) == 1 and gone.has_more and gone.deletions[0].entity == "Person"
    more = store.deletions(gone.next_token)
    assert {d.object_id for d in gone.deletions + more.deletions} == set(ids[:2]) and not more.has_more
    assert all(d.generation == 4 for d in gone.deletions + more.deletions)

    store.delete_history(before)
    with pytest.raises(ubiquity.HistoryExpired) as e:
        store.history(first.next_token)
    assert e.value.current_token == store.current_token()
