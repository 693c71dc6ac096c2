"""A context: a server-side unit of work with pending changes (SPEC's NSManagedObjectContext)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Union

from ubiquity.v1 import contexts_pb2 as cx
from ubiquity.v1 import objects_pb2 as ob

from ._calls import Caller, Retried, Unary, new_transaction_id
from .model import FetchResult, MergePolicy, ResultType, SaveResult, SortKey, fetch_spec
from .values import ValueLike, to_values

# Which generation a context reads: the newest each time, the one its first read found (the
# default), or the one a token names.
Generation = Union[Literal["unpinned", "first_read"], bytes]


def _mode(generation: Generation) -> tuple[cx.GenerationMode, bytes]:
    if isinstance(generation, bytes):
        return cx.GENERATION_MODE_PINNED_AT_TOKEN, generation
    if generation == "unpinned":
        return cx.GENERATION_MODE_UNPINNED, b""
    return cx.GENERATION_MODE_PINNED_AT_FIRST_READ, b""


@dataclass(frozen=True)
class ContextState:
    has_changes: bool
    inserted: int
    updated: int
    deleted: int
    token: bytes  # the pinned generation's token, empty until a pinning read
    generation_mode: str  # "unpinned", "pinned_at_first_read", "pinned_at_token"
    merge_policy: MergePolicy

    @staticmethod
    def of(s: cx.ContextState) -> "ContextState":
        mode = cx.GenerationMode.Name(s.generation_mode).removeprefix("GENERATION_MODE_").lower()
        return ContextState(s.has_changes, s.inserted_count, s.updated_count, s.deleted_count, s.token,
                            mode, MergePolicy(s.merge_policy))


class ContextCore:
    """What the sync `Context` and the asyncio `ubiquity.aio.Context` share: the context's ID, its
    last known state, and each call built as a value whose answer updates that state. They differ
    only in how they run the calls."""

    def __init__(self, state: cx.ContextState) -> None:
        self.id = state.context_id
        self.store_id = state.store_id
        self._state = ContextState.of(state)
        self._labels = 0

    @staticmethod
    def create_call(store_id: str, name: str, author: str, merge_policy: MergePolicy, generation: Generation,
                    parent_id: str = "") -> Unary[cx.ContextState]:
        mode, token = _mode(generation)
        return Unary("contexts", "CreateContext", cx.CreateContextRequest(
            store_id=store_id, name=name, author=author, merge_policy=merge_policy.value,
            generation_mode=mode, token=token, parent_context_id=parent_id), lambda s: s)

    def _child_call(self, name: str) -> Unary[cx.ContextState]:
        return self.create_call(self.store_id, name, "", self._state.merge_policy, "first_read", self.id)

    @property
    def state(self) -> ContextState:
        """The state as of the last call (`refresh_state()` asks the server)."""
        return self._state

    @property
    def has_changes(self) -> bool:
        return self._state.has_changes

    def _set(self, s: cx.ContextState) -> ContextState:
        self._state = ContextState.of(s)
        return self._state

    def _changed(self, method: str, request: object) -> Unary[ContextState]:
        return Unary("contexts", method, request, self._set)

    def _insert_call(self, entity: str, values: Mapping[str, ValueLike],
                     relationships: Mapping[str, Sequence[str]] | None) -> Unary[str]:
        self._labels += 1
        label = f"n{self._labels}"

        def inserted(r: cx.ContextInsertResponse) -> str:
            self._set(r.state)
            return str(r.object_ids[label])
        return Unary("contexts", "Insert", cx.ContextInsertRequest(context_id=self.id, inserts=[
            ob.Insert(temporary_id=label, entity=entity, values=to_values(values),
                      relationships=_refs(relationships))]), inserted)

    def _update_call(self, object_id: str, values: Mapping[str, ValueLike],
                     relationships: Mapping[str, Sequence[str]] | None) -> Unary[ContextState]:
        return self._changed("Update", cx.ContextUpdateRequest(context_id=self.id, updates=[
            ob.Update(object_id=object_id, values=to_values(values), relationships=_refs(relationships))]))

    def _delete_call(self, object_ids: Sequence[str]) -> Unary[ContextState]:
        return self._changed("Delete", cx.ContextDeleteRequest(context_id=self.id, object_ids=list(object_ids)))

    def _fetch_call(self, entity: str, predicate: str, arguments: Mapping[str, object] | None,
                    sort: Sequence[SortKey], limit: int, offset: int, result_type: ResultType,
                    properties: Iterable[str], include_pending: bool) -> Unary[FetchResult]:
        spec = fetch_spec(entity, predicate, arguments, sort, limit, offset, result_type, properties)
        return Unary("contexts", "Fetch", cx.ContextFetchRequest(
            context_id=self.id, fetch=spec, excludes_pending_changes=not include_pending), FetchResult.of)

    def _save_call(self, client_transaction_id: str | None, dry_run: bool) -> Retried[SaveResult]:
        txid = new_transaction_id(client_transaction_id)

        def saved(r: cx.ContextSaveResponse) -> SaveResult:
            self._set(r.state)
            return SaveResult.of(r.result, txid)
        return Retried("contexts", "Save", cx.ContextSaveRequest(
            context_id=self.id, client_transaction_id=txid, dry_run=dry_run), saved)

    def _state_call(self, method: str) -> Unary[ContextState]:
        """GetState, Rollback, Reset: a ContextRequest answered with the state."""
        return self._changed(method, cx.ContextRequest(context_id=self.id))

    def _refresh_call(self, merge_changes: bool) -> Unary[ContextState]:
        return self._changed("Refresh", cx.RefreshRequest(context_id=self.id, merge_changes=merge_changes))

    def _pin_call(self, generation: Generation) -> Unary[ContextState]:
        mode, token = _mode(generation)
        return self._changed("SetQueryGeneration", cx.SetQueryGenerationRequest(
            context_id=self.id, generation_mode=mode, token=token))

    def _close_call(self) -> Unary[None]:
        return Unary("contexts", "CloseContext", cx.ContextRequest(context_id=self.id), lambda r: None)


class Context(ContextCore):
    """Pending inserts, updates and deletes on the server, applied together by `save()`.

    Objects are named by ID: a pending insert gets a context ID (`…/Entity/t<n>`) usable in later
    calls until `save()` maps it to a permanent ID (`SaveResult.permanent_ids`). Reads see the
    pending changes unless asked not to. Use as a context manager to close it on the server.
    """

    def __init__(self, calls: Caller, state: cx.ContextState) -> None:
        super().__init__(state)
        self._calls = calls

    @staticmethod
    def create(calls: Caller, store_id: str, *, name: str = "", author: str = "",
               merge_policy: MergePolicy = MergePolicy.ERROR, generation: Generation = "first_read") -> "Context":
        return Context(calls, calls.run(ContextCore.create_call(store_id, name, author, merge_policy, generation)))

    def child(self, name: str = "") -> "Context":
        """A nested context whose save goes into this one (not the store)."""
        return Context(self._calls, self._calls.run(self._child_call(name)))

    # -- changes ------------------------------------------------------------

    def insert(self, entity: str, values: Mapping[str, ValueLike],
               relationships: Mapping[str, Sequence[str]] | None = None) -> str:
        """Adds a pending insert; returns the object's context ID."""
        return self._calls.run(self._insert_call(entity, values, relationships))

    def update(self, object_id: str, values: Mapping[str, ValueLike],
               relationships: Mapping[str, Sequence[str]] | None = None) -> None:
        self._calls.run(self._update_call(object_id, values, relationships))

    def delete(self, *object_ids: str) -> None:
        self._calls.run(self._delete_call(object_ids))

    # -- reads --------------------------------------------------------------

    def fetch(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
              sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
              result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
              include_pending: bool = True) -> FetchResult:
        """Fetches at the context's generation, with its pending changes unless `include_pending` is False."""
        return self._calls.run(self._fetch_call(entity, predicate, arguments, sort, limit, offset, result_type,
                                                properties, include_pending))

    # -- state --------------------------------------------------------------

    def refresh_state(self) -> ContextState:
        return self._calls.run(self._state_call("GetState"))

    def save(self, *, client_transaction_id: str | None = None, dry_run: bool = False) -> SaveResult:
        """Applies the pending changes under the context's merge policy, in one transaction.

        Raises ConflictError / ConstraintError under MergePolicy.ERROR (the pending changes stay).
        A save whose outcome is unknown (UNAVAILABLE, deadline) is retried with the same client
        transaction ID, which the server answers with the first outcome.
        """
        return self._calls.run(self._save_call(client_transaction_id, dry_run))

    def rollback(self) -> None:
        """Drops the pending changes; the pinned generation stays."""
        self._calls.run(self._state_call("Rollback"))

    def reset(self) -> None:
        """Drops the pending changes and the pin: the next read pins afresh."""
        self._calls.run(self._state_call("Reset"))

    def refresh(self, *, merge_changes: bool = False) -> None:
        """Moves the context to the current generation (keeping pending changes when `merge_changes`)."""
        self._calls.run(self._refresh_call(merge_changes))

    def pin(self, generation: Generation) -> None:
        """Sets the query generation: a token, "first_read" or "unpinned"."""
        self._calls.run(self._pin_call(generation))

    def close(self) -> None:
        self._calls.run(self._close_call())

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _refs(relationships: Mapping[str, Sequence[str]] | None) -> dict[str, ob.ObjectRefList]:
    return {k: ob.ObjectRefList(refs=[ob.ObjectRef(object_id=i) for i in ids])
            for k, ids in (relationships or {}).items()}
