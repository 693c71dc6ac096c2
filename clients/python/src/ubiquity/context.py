"""A context: a server-side unit of work with pending changes (SPEC's NSManagedObjectContext)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Union

from ubiquity.v1 import contexts_pb2 as cx, contexts_pb2_grpc
from ubiquity.v1 import objects_pb2 as ob

from ._calls import Caller
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


class Context:
    """Pending inserts, updates and deletes on the server, applied together by `save()`.

    Objects are named by ID: a pending insert gets a context ID (`…/Entity/t<n>`) usable in later
    calls until `save()` maps it to a permanent ID (`SaveResult.permanent_ids`). Reads see the
    pending changes unless asked not to. Use as a context manager to close it on the server.
    """

    def __init__(self, calls: Caller, stub: contexts_pb2_grpc.ContextsStub, state: cx.ContextState) -> None:
        self._calls = calls
        self._stub = stub
        self.id = state.context_id
        self.store_id = state.store_id
        self._state = ContextState.of(state)
        self._labels = 0

    @staticmethod
    def create(calls: Caller, stub: contexts_pb2_grpc.ContextsStub, store_id: str, *, name: str = "",
               author: str = "", merge_policy: MergePolicy = MergePolicy.ERROR,
               generation: Generation = "first_read", parent: "Context | None" = None) -> "Context":
        mode, token = _mode(generation)
        s = calls.unary(stub.CreateContext, cx.CreateContextRequest(
            store_id=store_id, name=name, author=author, merge_policy=merge_policy.value,
            generation_mode=mode, token=token, parent_context_id=parent.id if parent else ""))
        return Context(calls, stub, s)

    def child(self, name: str = "") -> "Context":
        """A nested context whose save goes into this one (not the store)."""
        return Context.create(self._calls, self._stub, self.store_id, name=name,
                              merge_policy=self._state.merge_policy, parent=self)

    # -- changes ------------------------------------------------------------

    def insert(self, entity: str, values: Mapping[str, ValueLike],
               relationships: Mapping[str, Sequence[str]] | None = None) -> str:
        """Adds a pending insert; returns the object's context ID."""
        self._labels += 1
        label = f"n{self._labels}"
        r = self._call(self._stub.Insert, cx.ContextInsertRequest(context_id=self.id, inserts=[
            ob.Insert(temporary_id=label, entity=entity, values=to_values(values),
                      relationships=_refs(relationships))]))
        self._state = ContextState.of(r.state)
        return str(r.object_ids[label])

    def update(self, object_id: str, values: Mapping[str, ValueLike],
               relationships: Mapping[str, Sequence[str]] | None = None) -> None:
        self._set(self._call(self._stub.Update, cx.ContextUpdateRequest(context_id=self.id, updates=[
            ob.Update(object_id=object_id, values=to_values(values), relationships=_refs(relationships))])))

    def delete(self, *object_ids: str) -> None:
        self._set(self._call(self._stub.Delete,
                             cx.ContextDeleteRequest(context_id=self.id, object_ids=list(object_ids))))

    # -- reads --------------------------------------------------------------

    def fetch(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
              sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
              result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
              include_pending: bool = True) -> FetchResult:
        """Fetches at the context's generation, with its pending changes unless `include_pending` is False."""
        spec = fetch_spec(entity, predicate, arguments, sort, limit, offset, result_type, properties)
        r = self._call(self._stub.Fetch, cx.ContextFetchRequest(
            context_id=self.id, fetch=spec, excludes_pending_changes=not include_pending))
        return FetchResult.of(r)

    # -- state --------------------------------------------------------------

    @property
    def state(self) -> ContextState:
        """The state as of the last call (`refresh_state()` asks the server)."""
        return self._state

    @property
    def has_changes(self) -> bool:
        return self._state.has_changes

    def refresh_state(self) -> ContextState:
        return self._set(self._call(self._stub.GetState, cx.ContextRequest(context_id=self.id)))

    def save(self, *, client_transaction_id: str | None = None, dry_run: bool = False) -> SaveResult:
        """Applies the pending changes under the context's merge policy, in one transaction.

        Raises ConflictError / ConstraintError under MergePolicy.ERROR (the pending changes stay).
        A save whose outcome is unknown (UNAVAILABLE, deadline) is retried with the same client
        transaction ID, which the server answers with the first outcome.
        """
        r, txid = self._calls.save(self._stub.Save, lambda txid: cx.ContextSaveRequest(
            context_id=self.id, client_transaction_id=txid, dry_run=dry_run), client_transaction_id)
        self._set(r.state)
        return SaveResult.of(r.result, txid)

    def rollback(self) -> None:
        """Drops the pending changes; the pinned generation stays."""
        self._set(self._call(self._stub.Rollback, cx.ContextRequest(context_id=self.id)))

    def reset(self) -> None:
        """Drops the pending changes and the pin: the next read pins afresh."""
        self._set(self._call(self._stub.Reset, cx.ContextRequest(context_id=self.id)))

    def refresh(self, *, merge_changes: bool = False) -> None:
        """Moves the context to the current generation (keeping pending changes when `merge_changes`)."""
        self._set(self._call(self._stub.Refresh, cx.RefreshRequest(context_id=self.id, merge_changes=merge_changes)))

    def pin(self, generation: Generation) -> None:
        """Sets the query generation: a token, "first_read" or "unpinned"."""
        mode, token = _mode(generation)
        self._set(self._call(self._stub.SetQueryGeneration, cx.SetQueryGenerationRequest(
            context_id=self.id, generation_mode=mode, token=token)))

    def close(self) -> None:
        self._call(self._stub.CloseContext, cx.ContextRequest(context_id=self.id))

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _call(self, method: object, request: object):  # type: ignore[no-untyped-def]
        return self._calls.unary(method, request)  # type: ignore[arg-type]

    def _set(self, s: cx.ContextState) -> ContextState:
        self._state = ContextState.of(s)
        return self._state


def _refs(relationships: Mapping[str, Sequence[str]] | None) -> dict[str, ob.ObjectRefList]:
    return {k: ob.ObjectRefList(refs=[ob.ObjectRef(object_id=i) for i in ids])
            for k, ids in (relationships or {}).items()}
