"""`Client` (a channel to one server) and `Store` (one store on it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

import grpc

from ubiquity.v1 import changes_pb2 as ch, changes_pb2_grpc, contexts_pb2_grpc
from ubiquity.v1 import models_pb2 as md, models_pb2_grpc
from ubiquity.v1 import objects_pb2 as ob
from ubiquity.v1 import stores_pb2 as st, stores_pb2_grpc

from ._calls import Caller, Metadata
from .session import Session
from .context import Context, Generation
from .errors import HistoryExpired
from .feed import ChangeFeed, Start
from .model import FetchResult, MergePolicy, Object, ResultType, SaveResult, SortKey, fetch_spec
from .values import ValueLike, to_values

# The channel retries a lost connection quickly so a feed resumes soon after a server restart
# (grpc's defaults start at 1 s and grow to 120 s).
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


@dataclass(frozen=True)
class StoreInfo:
    id: str
    name: str
    model_version_hash: str
    token: bytes
    generation: int

    @staticmethod
    def of(s: st.StoreInfo) -> "StoreInfo":
        return StoreInfo(s.store_id, s.name, s.model_version_hash, s.token, s.generation)


class Client:
    """A connection to one ubiquityd.

    `Client("127.0.0.1:50051", api_key=..., device_id=...)` talks plaintext and signs in with the
    API key on its first call, and again before the session expires (`ubiquity.session`). For TLS
    pass `channel_credentials` (`grpc.ssl_channel_credentials(...)`). `metadata` is sent with every
    call as is (e.g. an `authorization` of a session token obtained elsewhere).
    """

    def __init__(self, target: str, *, channel_credentials: grpc.ChannelCredentials | None = None,
                 credentials: grpc.CallCredentials | None = None, metadata: Metadata = (),
                 timeout: float = 30.0, save_attempts: int = 3,
                 interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = (),
                 api_key: str | None = None, device_id: str | None = None) -> None:
        if credentials is not None:
            if channel_credentials is None:
                raise ValueError("call credentials need a secure channel: pass channel_credentials too")
            channel_credentials = grpc.composite_channel_credentials(channel_credentials, credentials)
        if channel_credentials is not None:
            channel = grpc.secure_channel(target, channel_credentials, options=CHANNEL_OPTIONS)
        else:
            channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        if interceptors:
            channel = grpc.intercept_channel(channel, *interceptors)
        self.channel = channel
        session = Session(channel, api_key, device_id or "python-client", timeout) if api_key else None
        self._calls = Caller(timeout, metadata, save_attempts, session)
        self._stores = stores_pb2_grpc.StoresStub(channel)
        self._models = models_pb2_grpc.ModelsStub(channel)
        self._contexts = contexts_pb2_grpc.ContextsStub(channel)
        self._changes = changes_pb2_grpc.ChangesStub(channel)

    def close(self) -> None:
        self.channel.close()

    def sign_out(self) -> None:
        """Ends this client's session (signed in with `api_key`); a later call signs in again."""
        if self._calls.session:
            self._calls.session.sign_out()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def open_store(self, name: str, *, must_exist: bool = False) -> "Store":
        """Opens the store called `name`, creating it unless `must_exist`."""
        r = self._calls.unary(self._stores.OpenStore, st.OpenStoreRequest(name=name, must_exist=must_exist))
        return Store(self, StoreInfo.of(r.store), created=r.created)

    def list_stores(self) -> list[StoreInfo]:
        r = self._calls.unary(self._stores.ListStores, st.ListStoresRequest())
        return [StoreInfo.of(s) for s in r.stores]


Inserts = Mapping[str, tuple[str, Mapping[str, ValueLike]]]
Updates = Mapping[str, Mapping[str, ValueLike]]


def save_request(store_id: str, inserts: Inserts | None, updates: Updates | None, deletes: Iterable[str],
                 expected_versions: Mapping[str, int] | None, merge_policy: MergePolicy,
                 author: str) -> Callable[[str], st.SaveRequest]:
    """A Stores.Save request for a client transaction ID (the same for every retry)."""
    ev = expected_versions or {}
    ins = [ob.Insert(temporary_id=t, entity=e, values=to_values(v)) for t, (e, v) in (inserts or {}).items()]
    ups = [ob.Update(object_id=i, values=to_values(v), expected_version=ev.get(i))
           for i, v in (updates or {}).items()]
    dels = [ob.Delete(object_id=i, expected_version=ev.get(i)) for i in deletes]
    return lambda txid: st.SaveRequest(store_id=store_id, inserts=ins, updates=ups, deletes=dels,
                                       merge_policy=merge_policy.value, author=author,
                                       client_transaction_id=txid)


class Store:
    """One store: its model, reads at a generation, saves, contexts and the change feed."""

    def __init__(self, client: Client, info: StoreInfo, created: bool = False) -> None:
        self.client = client
        self.info = info
        self.id = info.id
        self.name = info.name
        self.created = created

    # -- model --------------------------------------------------------------

    def register_model(self, model: md.Model, *, dry_run: bool = False) -> md.RegisterModelResponse:
        """Registers (or migrates to) `model`; a `ubiquity.v1.models_pb2.Model`."""
        c = self.client
        r: md.RegisterModelResponse = c._calls.unary(
            c._models.RegisterModel, md.RegisterModelRequest(store_id=self.id, model=model, dry_run=dry_run))
        return r

    # -- reads --------------------------------------------------------------

    def current_token(self) -> bytes:
        c = self.client
        r: st.CurrentGenerationResponse = c._calls.unary(
            c._stores.CurrentGeneration, st.CurrentGenerationRequest(store_id=self.id))
        return r.token

    def fetch(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
              sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
              result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
              at: bytes | None = None) -> FetchResult:
        """Fetches with an NSPredicate-format string (`"age > $min"`, arguments `{"min": 30}`), at the
        generation `at` names (a token from an earlier answer) or at the current one."""
        c = self.client
        spec = fetch_spec(entity, predicate, arguments, sort, limit, offset, result_type, properties)
        r = c._calls.unary(c._stores.Fetch, st.FetchRequest(
            store_id=self.id, fetch=spec, at=ob.ReadGeneration(token=at or b"")))
        return FetchResult.of(r)

    def get(self, object_ids: Iterable[str], *, at: bytes | None = None) -> dict[str, Object]:
        """The objects with these IDs that exist (at `at`, or now), by ID; missing ones are absent."""
        c = self.client
        r = c._calls.unary(c._stores.GetObjects, st.GetObjectsRequest(
            store_id=self.id, object_ids=list(object_ids), at=ob.ReadGeneration(token=at or b"")))
        return {o.object_id: Object.of(o) for o in r.objects}

    # -- writes -------------------------------------------------------------

    def save(self, *, inserts: Inserts | None = None, updates: Updates | None = None,
             deletes: Iterable[str] = (), expected_versions: Mapping[str, int] | None = None,
             merge_policy: MergePolicy = MergePolicy.ERROR, author: str = "",
             client_transaction_id: str | None = None) -> SaveResult:
        """One atomic save without a context.

        `inserts` maps a temporary ID to (entity, values); `updates` and `deletes` name objects by
        ID; `expected_versions` enables optimistic locking per object. Retried with one client
        transaction ID when the outcome is unknown, so it is applied at most once.
        """
        c = self.client
        make = save_request(self.id, inserts, updates, deletes, expected_versions, merge_policy, author)
        r, txid = c._calls.save(c._stores.Save, make, client_transaction_id)
        return SaveResult.of(r, txid)

    def delete_history(self, through_token: bytes) -> bytes:
        """Trims the change history through `through_token` (inclusive); returns the oldest retained token.
        Feeds behind it end with HistoryExpired."""
        c = self.client
        r: ch.DeleteHistoryResponse = c._calls.unary(c._changes.DeleteHistory, ch.DeleteHistoryRequest(
            store_id=self.id, through_token=through_token))
        return r.oldest_retained_token

    # -- contexts and feed --------------------------------------------------

    def context(self, name: str = "", *, author: str = "", merge_policy: MergePolicy = MergePolicy.ERROR,
                generation: Generation = "first_read") -> Context:
        """A unit of work on this store (see `Context`)."""
        return Context.create(self.client._calls, self.client._contexts, self.id, name=name, author=author,
                              merge_policy=merge_policy, generation=generation)

    def changes(self, *, start: Start = "now", entities: Iterable[str] = (), include_values: bool = False,
                exclude_authors: Iterable[str] = (),
                on_history_expired: Callable[[HistoryExpired], bytes | None] | None = None,
                reconnect_for: float = 60.0) -> ChangeFeed:
        """The store's change feed as an iterator of events (see `ChangeFeed`).

        `start` is "now", "oldest" or a token. "now" is read here, so every save that returns after
        this call is in the feed, however late the iteration starts.
        """
        if start == "now":
            start = self.current_token()
        return ChangeFeed(self.client._changes, lambda: self.client._calls.metadata, self.id, start=start,
                          entities=entities, include_values=include_values, exclude_authors=exclude_authors,
                          on_history_expired=on_history_expired, reconnect_for=reconnect_for)


__all__ = ["Client", "Store", "StoreInfo"]
