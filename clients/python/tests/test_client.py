"""The client against a real ubiquityd: stores, fetches, saves, contexts, typed errors."""

from __future__ import annotations

import uuid

import grpc
import pytest

import ubiquity
from ubiquity import MergePolicy, ResultType


def add_people(store: ubiquity.Store, *people: dict[str, object]) -> list[str]:
    r = store.save(inserts={f"p{i}": ("Person", p) for i, p in enumerate(people)})  # type: ignore[misc]
    return [r.permanent_ids[f"p{i}"] for i in range(len(people))]


def test_open_list_and_reopen_stores(client: ubiquity.Client) -> None:
    name = f"s-{uuid.uuid4()}"
    a = client.open_store(name)
    assert a.created
    b = client.open_store(name, must_exist=True)
    assert b.id == a.id and not b.created
    assert name in [s.name for s in client.list_stores()]
    with pytest.raises(ubiquity.NotFoundError) as e:
        client.open_store(f"missing-{uuid.uuid4()}", must_exist=True)
    assert e.value.reason == "STORE_NOT_FOUND"


def test_save_then_fetch_with_predicate_arguments_sort_limit_offset(store: ubiquity.Store) -> None:
    ids = add_people(store, {"name": "Ann", "age": 30}, {"name": "Bob", "age": 40},
                     {"name": "Cid", "age": 50}, {"name": "Dee", "age": 20})
    r = store.fetch("Person", "age >= $min", {"min": 30}, sort=["-age"])
    assert [o["name"] for o in r] == ["Cid", "Bob", "Ann"]
    page = store.fetch("Person", sort=["age"], limit=2, offset=1)
    assert [o["name"] for o in page] == ["Ann", "Bob"]
    inlist = store.fetch("Person", "name IN $names", {"names": ["Dee", "Bob"]}, sort=["name"])
    assert [o.id for o in inlist] == [ids[1], ids[3]]
    count = store.fetch("Person", "age < 45", result_type=ResultType.COUNT)
    assert count.count == 3
    only_ids = store.fetch("Person", "name == 'Ann'", result_type=ResultType.OBJECT_IDS)
    assert only_ids.object_ids == [ids[0]]
    got = store.get([ids[0], ids[2]])
    assert {o["name"] for o in got.values()} == {"Ann", "Cid"} and got[ids[0]].version == 1


def test_fetch_at_a_token_sees_the_store_as_it_was(store: ubiquity.Store) -> None:
    (ann,) = add_people(store, {"name": "Ann", "age": 30})
    before = store.current_token()
    store.save(updates={ann: {"age": 31}})
    assert store.fetch("Person", at=before).objects[0]["age"] == 30
    assert store.get([ann], at=before)[ann]["age"] == 30
    assert store.fetch("Person").objects[0]["age"] == 31


def test_context_unit_of_work_pending_state_save_rollback_reset(store: ubiquity.Store) -> None:
    with store.context("ui") as ctx:
        tmp = ctx.insert("Person", {"name": "Ann", "age": 30})
        assert ctx.has_changes and ctx.state.inserted == 1
        assert [o["name"] for o in ctx.fetch("Person")] == ["Ann"]
        assert len(ctx.fetch("Person", include_pending=False)) == 0
        assert len(store.fetch("Person")) == 0  # nothing in the store before save
        r = ctx.save()
        ann = r.permanent_ids[tmp]
        assert not ctx.has_changes and store.get([ann])[ann]["name"] == "Ann"

        ctx.refresh()
        ctx.update(ann, {"age": 31})
        ctx.delete(ann)
        assert ctx.state.deleted == 1
        ctx.rollback()
        assert not ctx.has_changes and not ctx.refresh_state().has_changes
        ctx.insert("Person", {"name": "Bob"})
        ctx.reset()
        assert not ctx.has_changes
    assert [o["name"] for o in store.fetch("Person")] == ["Ann"]
    with pytest.raises(ubiquity.NotFoundError) as e:
        ctx.refresh_state()  # closed by the with block
    assert e.value.reason == "CONTEXT_NOT_FOUND"


def _conflicting_context(store: ubiquity.Store, policy: MergePolicy) -> tuple[ubiquity.Context, str]:
    """A context that read Ann at age 30, then the store moved her to 35 and email new@x."""
    (ann,) = add_people(store, {"name": "Ann", "age": 30, "score": 1.0, "email": "old@x"})
    ctx = store.context("ui", merge_policy=policy)
    ctx.fetch("Person")  # pins the generation the context reads
    store.save(updates={ann: {"age": 35, "email": "new@x"}})
    ctx.update(ann, {"age": 33, "score": 9.0})
    return ctx, ann


def test_conflict_under_error_policy_raises_with_decoded_records(store: ubiquity.Store) -> None:
    ctx, ann = _conflicting_context(store, MergePolicy.ERROR)
    with pytest.raises(ubiquity.ConflictError) as e:
        ctx.save()
    err = e.value
    assert err.reason == "MERGE_CONFLICT" and err.code == grpc.StatusCode.ABORTED
    (c,) = err.conflicts
    assert c.kind == "version_changed" and c.object_id == ann
    assert c.client_version == 1 and c.store_version == 2
    assert c.store_values["age"] == 35 and c.client_changes["score"] == 9.0
    assert ctx.has_changes  # pending changes are kept for a retry
    assert store.get([ann])[ann]["score"] == 1.0  # nothing applied


@pytest.mark.parametrize("policy,expect", [
    # both sides changed age; only the context changed score; only the store changed email
    (MergePolicy.STORE_TRUMP, {"age": 35, "score": 9.0, "email": "new@x"}),
    (MergePolicy.OBJECT_TRUMP, {"age": 33, "score": 9.0, "email": "new@x"}),
    (MergePolicy.OVERWRITE, {"age": 33, "score": 9.0, "email": "old@x"}),
    (MergePolicy.ROLLBACK, {"age": 35, "score": 1.0, "email": "new@x"}),
])
def test_conflict_under_each_trump_policy(store: ubiquity.Store, policy: MergePolicy,
                                          expect: dict[str, object]) -> None:
    ctx, ann = _conflicting_context(store, policy)
    r = ctx.save()
    got = store.get([ann])[ann]
    assert {k: got[k] for k in expect} == expect
    if policy is MergePolicy.ROLLBACK:
        assert r.skipped_object_ids == [ann]
    else:
        assert [c.object_id for c in r.resolved_conflicts] == [ann]


def test_pinned_context_reads_its_generation_until_refreshed(store: ubiquity.Store) -> None:
    (ann,) = add_people(store, {"name": "Ann", "age": 30})
    pinned_at = store.current_token()
    store.save(updates={ann: {"age": 31}})
    ctx = store.context(generation=pinned_at)
    assert ctx.fetch("Person").objects[0]["age"] == 30
    store.save(updates={ann: {"age": 32}})
    assert ctx.fetch("Person").objects[0]["age"] == 30
    assert ctx.state.generation_mode == "pinned_at_token"
    ctx.pin("unpinned")
    assert ctx.fetch("Person").objects[0]["age"] == 32
    first = store.context()  # pinned at first read
    assert first.fetch("Person").objects[0]["age"] == 32
    store.save(updates={ann: {"age": 33}})
    assert first.fetch("Person").objects[0]["age"] == 32
    first.refresh()
    assert first.fetch("Person").objects[0]["age"] == 33


def test_constraint_clash_is_a_constraint_error(store: ubiquity.Store) -> None:
    add_people(store, {"name": "Ann", "email": "ann@x"})
    with pytest.raises(ubiquity.ConstraintError) as e:
        add_people(store, {"name": "Ann2", "email": "ann@x"})
    assert e.value.reason == "CONSTRAINT_CONFLICT"
    assert e.value.conflicts[0].kind == "uniqueness_clash"
    assert e.value.conflicts[0].constraint == ["email"]
    assert isinstance(e.value, ubiquity.ConflictError)


def test_bad_input_raises_typed_errors_with_reason_and_fields(store: ubiquity.Store) -> None:
    with pytest.raises(ubiquity.InvalidArgumentError) as e:
        store.fetch("Person", "age >")
    assert e.value.reason == "PREDICATE_SYNTAX"
    assert e.value.violations and e.value.violations[0].field == "fetch.predicate"
    with pytest.raises(ubiquity.InvalidArgumentError) as e:
        store.fetch("Nobody")
    assert e.value.reason == "UNKNOWN_ENTITY"
    with pytest.raises(ubiquity.InvalidArgumentError) as e:
        store.save(inserts={"a": ("Person", {"age": 3})})  # name is required
    assert e.value.reason == "VALIDATION_FAILED"
    assert any(v.field.startswith("inserts[0].values.name") for v in e.value.violations)
    assert len(store.fetch("Person")) == 0  # nothing applied


def test_expired_generation_token_is_typed(client: ubiquity.Client, store: ubiquity.Store) -> None:
    other = client.open_store(f"other-{uuid.uuid4()}")
    with pytest.raises(ubiquity.InvalidArgumentError) as e:
        store.fetch("Person", at=b"not a token")
    assert e.value.reason == "BAD_TOKEN"
    with pytest.raises(ubiquity.FailedPreconditionError) as f:
        other.fetch("Person")
    assert f.value.reason == "NO_MODEL"


class LoseFirstSaveResponse(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Lets the first Save reach the server and apply, then reports it as timed out: the case a
    client transaction ID exists for (the client cannot know whether the save happened)."""

    def __init__(self) -> None:
        self.lost = 0

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        outcome = continuation(details, request)
        if details.method.endswith("/Save") and self.lost == 0:
            outcome.result()  # the server applied it
            self.lost += 1
            raise _LostResponse()
        return outcome


class _LostResponse(grpc.RpcError):  # type: ignore[misc]
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return "response lost (test)"

    def trailing_metadata(self) -> tuple[()]:
        return ()


@pytest.mark.parametrize("via", ["store", "context"])
def test_a_save_whose_response_was_lost_is_retried_and_applied_once(server, via: str) -> None:  # type: ignore[no-untyped-def]
    lose = LoseFirstSaveResponse()
    with ubiquity.Client(server.address, interceptors=[lose], api_key=server.api_key) as c:
        store = c.open_store("retry")
        from conftest import person_model
        store.register_model(person_model())
        if via == "store":
            r = store.save(inserts={"a": ("Person", {"name": "Ann"})})
        else:
            ctx = store.context()
            ctx.insert("Person", {"name": "Ann"})
            r = ctx.save()
        assert lose.lost == 1 and r.replayed
        assert len(store.fetch("Person")) == 1


def test_the_same_client_transaction_id_applies_once(store: ubiquity.Store) -> None:
    first = store.save(inserts={"a": ("Person", {"name": "Ann"})}, client_transaction_id="tx-1")
    again = store.save(inserts={"a": ("Person", {"name": "Ann"})}, client_transaction_id="tx-1")
    assert not first.replayed and again.replayed
    assert again.permanent_ids == first.permanent_ids
    assert store.fetch("Person", result_type=ResultType.COUNT).count == 1


def test_values_round_trip_with_their_python_types(store: ubiquity.Store) -> None:
    (ann,) = add_people(store, {"name": "Ann", "age": ubiquity.Typed(7, "int32"), "score": 2.5, "email": None})
    got = store.get([ann])[ann]
    assert {k: got.values.get(k) for k in ("name", "age", "score", "email")} == \
        {"name": "Ann", "age": 7, "score": 2.5, "email": None}
    with pytest.raises(TypeError):
        store.save(inserts={"x": ("Person", {"name": object()})})  # type: ignore[dict-item]
