"""The calls of `Store`, `Client` and the key-value store, each built once as a value (see
`_calls`): the request and the conversion of its answer. The sync and asyncio classes run them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import keyvalue_pb2 as kv
from ubiquity.v1 import models_pb2 as md
from ubiquity.v1 import objects_pb2 as ob
from ubiquity.v1 import stores_pb2 as st

from ._calls import Retried, Streaming, Unary, new_transaction_id
from .events import StoreEvent
from .model import FetchResult, MergePolicy, Object, ResultType, SaveResult, SortKey, StoreInfo, fetch_spec
from .results import (BaselineChunk, BatchResult, DeduplicateResult, DeletionsPage, HistoryPage, ImportResult,
                      KeyValueEntry, KeyValuePage, KeyValueWrite, SeedResult)
from .values import ValueLike, to_argument, to_values

Inserts = Mapping[str, tuple[str, Mapping[str, ValueLike]]]
Updates = Mapping[str, Mapping[str, ValueLike]]


def _at(token: bytes | None) -> ob.ReadGeneration:
    return ob.ReadGeneration(token=token or b"")


def _inserts(inserts: Inserts | None) -> list[ob.Insert]:
    return [ob.Insert(temporary_id=t, entity=e, values=to_values(v)) for t, (e, v) in (inserts or {}).items()]


def _variables(arguments: Mapping[str, object] | None) -> dict[str, ob.Argument]:
    return {k: to_argument(x) for k, x in (arguments or {}).items()}


# -- stores -------------------------------------------------------------------

def open_store(name: str, must_exist: bool) -> Unary[tuple[StoreInfo, bool]]:
    return Unary("stores", "OpenStore", st.OpenStoreRequest(name=name, must_exist=must_exist),
                 lambda r: (StoreInfo.of(r.store), r.created))


def list_stores() -> Unary[list[StoreInfo]]:
    return Unary("stores", "ListStores", st.ListStoresRequest(), lambda r: [StoreInfo.of(s) for s in r.stores])


def register_model(store_id: str, model: md.Model, dry_run: bool) -> Unary[md.RegisterModelResponse]:
    return Unary("models", "RegisterModel", md.RegisterModelRequest(store_id=store_id, model=model, dry_run=dry_run),
                 lambda r: r)


def get_model(store_id: str) -> Unary[md.GetModelResponse]:
    return Unary("models", "GetModel", md.GetModelRequest(store_id=store_id), lambda r: r)


def current_token(store_id: str) -> Unary[bytes]:
    return Unary("stores", "CurrentGeneration", st.CurrentGenerationRequest(store_id=store_id), lambda r: r.token)


def fetch_request(store_id: str, entity: str, predicate: str, arguments: Mapping[str, object] | None,
                  sort: Sequence[SortKey], limit: int, offset: int, result_type: ResultType,
                  properties: Iterable[str], at: bytes | None) -> st.FetchRequest:
    spec = fetch_spec(entity, predicate, arguments, sort, limit, offset, result_type, properties)
    return st.FetchRequest(store_id=store_id, fetch=spec, at=_at(at))


def fetch(request: st.FetchRequest) -> Unary[FetchResult]:
    return Unary("stores", "Fetch", request, FetchResult.of)


def fetch_stream(request: st.FetchRequest) -> Streaming[FetchResult]:
    return Streaming("stores", "FetchStream", request, FetchResult.of)


def get(store_id: str, object_ids: Iterable[str], at: bytes | None) -> Unary[dict[str, Object]]:
    return Unary("stores", "GetObjects", st.GetObjectsRequest(store_id=store_id, object_ids=list(object_ids), at=_at(at)),
                 lambda r: {o.object_id: Object.of(o) for o in r.objects})


def save(store_id: str, inserts: Inserts | None, updates: Updates | None, deletes: Iterable[str],
         expected_versions: Mapping[str, int] | None, merge_policy: MergePolicy, author: str,
         client_transaction_id: str | None) -> Retried[SaveResult]:
    """A Stores.Save; one client transaction ID for every attempt, so it applies at most once."""
    txid = new_transaction_id(client_transaction_id)
    ev = expected_versions or {}
    ups = [ob.Update(object_id=i, values=to_values(v), expected_version=ev.get(i))
           for i, v in (updates or {}).items()]
    dels = [ob.Delete(object_id=i, expected_version=ev.get(i)) for i in deletes]
    request = st.SaveRequest(store_id=store_id, inserts=_inserts(inserts), updates=ups, deletes=dels,
                             merge_policy=merge_policy.value, author=author, client_transaction_id=txid)
    return Retried("stores", "Save", request, lambda r: SaveResult.of(r, txid))


def delete_history(store_id: str, through_token: bytes) -> Unary[bytes]:
    return Unary("changes", "DeleteHistory", ch.DeleteHistoryRequest(store_id=store_id, through_token=through_token),
                 lambda r: r.oldest_retained_token)


def acknowledge_store_event(event: StoreEvent) -> Unary[bool]:
    ack = event.acknowledgement
    if ack is None:
        raise ValueError("this StoreEvent asks for no acknowledgement: subscribe with acknowledges_store_events=True")
    # with the receiving stream's session, not the client's current one (`Acknowledgement.authorization`);
    # True when a transition was waiting for it; a repeat or a late one is a harmless False
    return Unary("changes", "AcknowledgeStoreEvent", ch.AcknowledgeStoreEventRequest(event_token=ack.event_token),
                 lambda r: bool(r.awaited),
                 authorization=(("authorization", ack.authorization),) if ack.authorization else None)


def fetch_history(store_id: str, after: bytes | None, entities: Iterable[str], include_values: bool,
                  page_size: int) -> Unary[HistoryPage]:
    request = ch.FetchHistoryRequest(store_id=store_id, page_size=page_size, filter=ch.ChangeFilter(
        entities=list(entities), include_values=include_values))
    # `from` is a Python keyword; after None: from the oldest retained transaction
    getattr(request, "from").CopyFrom(ch.StartPoint(token=after) if after else ch.StartPoint(oldest=True))
    return Unary("changes", "FetchHistory", request, HistoryPage.of)


def fetch_deletions(store_id: str, after: bytes, entities: Iterable[str], page_size: int) -> Unary[DeletionsPage]:
    return Unary("changes", "FetchDeletions", ch.FetchDeletionsRequest(
        store_id=store_id, after_token=after, entities=list(entities), page_size=page_size), DeletionsPage.of)


def batch_insert(store_id: str, entity: str, objects: Iterable[Mapping[str, ValueLike]], upsert: bool,
                 author: str, return_object_ids: bool) -> Unary[BatchResult]:
    return Unary("stores", "BatchInsert", st.BatchInsertRequest(
        store_id=store_id, entity=entity, objects=[st.ObjectValues(values=to_values(o)) for o in objects],
        upsert=upsert, author=author, return_object_ids=return_object_ids), BatchResult.of)


def batch_update(store_id: str, entity: str, predicate: str, arguments: Mapping[str, object] | None,
                 values: Mapping[str, ValueLike], author: str) -> Unary[BatchResult]:
    return Unary("stores", "BatchUpdate", st.BatchUpdateRequest(
        store_id=store_id, entity=entity, predicate=predicate, variables=_variables(arguments),
        values=to_values(values), author=author), BatchResult.of)


def batch_delete(store_id: str, entity: str, predicate: str, arguments: Mapping[str, object] | None,
                 object_ids: Iterable[str], author: str) -> Unary[BatchResult]:
    return Unary("stores", "BatchDelete", st.BatchDeleteRequest(
        store_id=store_id, entity=entity, predicate=predicate, variables=_variables(arguments),
        object_ids=list(object_ids), author=author), BatchResult.of)


def deduplicate(store_id: str, entity: str, unique_key: Sequence[str], batch_size: int,
                author: str) -> Unary[DeduplicateResult]:
    return Unary("stores", "Deduplicate", st.DeduplicateRequest(
        store_id=store_id, entity=entity, unique_key=list(unique_key), batch_size=batch_size, author=author),
        DeduplicateResult.of)


def seed(store_id: str, seed_id: str, inserts: Inserts, author: str) -> Retried[SeedResult]:
    # The seed ID makes a repeat answer `applied=False` instead of inserting twice: safe to retry.
    return Retried("stores", "Seed", st.SeedRequest(store_id=store_id, seed_id=seed_id, inserts=_inserts(inserts),
                                                   author=author), SeedResult.of)


def export_baseline(store_id: str, at: bytes | None, batch_size: int) -> Streaming[BaselineChunk]:
    return Streaming("stores", "ExportBaseline", st.ExportBaselineRequest(
        store_id=store_id, at=_at(at), batch_size=batch_size), BaselineChunk.of)


def import_store(store_id: str, source_store_id: str, source_at: bytes | None, deduplicate_by_constraints: bool,
                 author: str) -> Unary[ImportResult]:
    return Unary("stores", "ImportStore", st.ImportStoreRequest(
        store_id=store_id, source_store_id=source_store_id, source_at=_at(source_at),
        deduplicate_by_constraints=deduplicate_by_constraints, author=author), ImportResult.of)


def replace_store(store_id: str, source_store_id: str) -> Unary[bytes]:
    return Unary("stores", "ReplaceStore", st.ReplaceStoreRequest(store_id=store_id, source_store_id=source_store_id),
                 lambda r: r.token)


def destroy_store(store_id: str) -> Unary[None]:
    return Unary("stores", "DestroyStore", st.DestroyStoreRequest(store_id=store_id), lambda r: None)


# -- key-value ----------------------------------------------------------------

def _precondition(expected_version: int | None, must_not_exist: bool) -> kv.KeyValuePrecondition | None:
    if expected_version is not None and must_not_exist:
        raise ValueError("expected_version and must_not_exist exclude each other")
    if expected_version is not None:
        return kv.KeyValuePrecondition(expected_version=expected_version)
    return kv.KeyValuePrecondition(must_not_exist=True) if must_not_exist else None


def kv_get(key: str) -> Unary[KeyValueEntry]:
    return Unary("keyvalue", "Get", kv.KeyValueGetRequest(key=key), KeyValueEntry.of)


def kv_set(key: str, value: bytes, expected_version: int | None, must_not_exist: bool,
           author: str) -> Unary[KeyValueWrite]:
    return Unary("keyvalue", "Set", kv.KeyValueSetRequest(
        key=key, value=value, precondition=_precondition(expected_version, must_not_exist), author=author),
        KeyValueWrite.of)


def kv_delete(key: str, expected_version: int | None, author: str) -> Unary[KeyValueWrite]:
    return Unary("keyvalue", "Delete", kv.KeyValueDeleteRequest(
        key=key, precondition=_precondition(expected_version, False), author=author), KeyValueWrite.of)


def kv_list(prefix: str, page_size: int, page_token: bytes, keys_only: bool) -> Unary[KeyValuePage]:
    return Unary("keyvalue", "List", kv.KeyValueListRequest(
        prefix=prefix, page_size=page_size, page_token=page_token, keys_only=keys_only), KeyValuePage.of)
