"""`Client` (a channel to one server) and `Store` (one store on it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc

from ubiquity.v1 import accounts_pb2_grpc, admin_pb2_grpc, changes_pb2_grpc, contexts_pb2_grpc, keyvalue_pb2_grpc, models_pb2 as md
from ubiquity.v1 import models_pb2_grpc, stores_pb2_grpc

from . import _ops as ops
from .accounts import Accounts
from .admin import Admin
from ._calls import Caller, Metadata
from ._ops import Inserts, Updates
from .context import Context, Generation
from .errors import HistoryExpired
from .events import StoreEvent
from .feed import ChangeFeed, Resumer, Start, StoreEventHook, _filter, renews_session, sync_feed
from .keyvalue import KeyValues
from .live import LiveQuery
from .model import FetchResult, MergePolicy, Object, ResultType, SaveResult, SortKey, StoreInfo
from .results import BaselineChunk, BatchResult, DeduplicateResult, DeletionsPage, HistoryPage, ImportResult, SeedResult
from .session import Session, SessionState, SignedIn
from .tls import CHANNEL_OPTIONS, TLS, channel_settings
from .values import ValueLike


def stubs(channel: grpc.Channel | grpc.aio.Channel) -> dict[str, object]:
    """The generated stubs a client calls, by the service names `_calls` uses."""
    return {"stores": stores_pb2_grpc.StoresStub(channel), "models": models_pb2_grpc.ModelsStub(channel),
            "contexts": contexts_pb2_grpc.ContextsStub(channel), "changes": changes_pb2_grpc.ChangesStub(channel),
            "keyvalue": keyvalue_pb2_grpc.KeyValueStub(channel), "admin": admin_pb2_grpc.AdminStub(channel),
            "accounts": accounts_pb2_grpc.AccountsStub(channel)}


def credentials_metadata(metadata: Metadata, api_key: str | None, operator_key: str | None) -> Metadata:
    """`metadata` with the operator key's `authorization` when one is given."""
    if operator_key is None:
        return metadata
    if api_key:
        raise ValueError("api_key and operator_key exclude each other: an operator key is not an account's")
    return tuple(metadata) + (("authorization", f"Bearer {operator_key}"),)


def session_state(api_key: str | None, device_id: str | None, local_device_secret: str | None) -> SessionState | None:
    if local_device_secret and not api_key:
        raise ValueError("local_device_secret imports local stores at sign-in: it needs api_key")
    return SessionState(api_key, device_id or "python-client", local_device_secret) if api_key else None


class Client:
    """A connection to one ubiquityd.

    `Client("127.0.0.1:50051", api_key=..., device_id=...)` talks plaintext and signs in with the
    API key on its first call, and again before the session expires (`ubiquity.session`).
    `tls=TLS(ca="ca.crt")` connects over TLS trusting that CA (`cert=`/`key=` add a client
    certificate); `channel_credentials` takes grpcio credentials of your own instead. `metadata`
    is sent with every call as is (e.g. an `authorization` of a session token obtained elsewhere).

    `local_device_secret` (with `api_key`): the secret of this device's local sessions; the first
    sign-in imports its local stores into the account's (`sign_in().local_import` has the
    counts). `Client.start_local_session(target, device_id)` instead works in the device's local
    stores before any account. `operator_key` sends the server's operator key (Admin backups,
    account administration) instead of signing in.
    """

    def __init__(self, target: str, *, tls: TLS | None = None,
                 channel_credentials: grpc.ChannelCredentials | None = None,
                 credentials: grpc.CallCredentials | None = None, metadata: Metadata = (),
                 timeout: float = 30.0, save_attempts: int = 3,
                 interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = (),
                 api_key: str | None = None, device_id: str | None = None,
                 local_device_secret: str | None = None, operator_key: str | None = None) -> None:
        metadata = credentials_metadata(metadata, api_key, operator_key)
        state = session_state(api_key, device_id, local_device_secret)
        creds, options = channel_settings(tls, channel_credentials, credentials)
        channel = grpc.secure_channel(target, creds, options=options) if creds is not None \
            else grpc.insecure_channel(target, options=options)
        if interceptors:
            channel = grpc.intercept_channel(channel, *interceptors)
        self.channel = channel
        session = Session(channel, state, timeout) if state else None
        self._calls = Caller(stubs(channel), timeout, metadata, save_attempts, session)
        self.key_values = KeyValues(self._calls)
        """The account's key-value store (`ubiquity.keyvalue.KeyValues`)."""
        self.admin = Admin(self._calls)
        """The server's Admin calls (`ubiquity.admin.Admin`); backups need `operator_key`."""
        self.accounts = Accounts(self._calls)
        """The operator's account calls (`ubiquity.accounts.Accounts`); they need `operator_key`."""

    @classmethod
    def start_local_session(cls, target: str, device_id: str, device_secret: str | None = None,
                            **options: Any) -> "Client":
        """A client working in this device's local stores, before it signs in to any account
        (`Accounts.StartLocalSession`; the server must run with `--local-stores`). Without
        `device_secret` the call registers the device: keep `client.device_secret` (shown once),
        for later local sessions and for `Client(..., local_device_secret=)` at the first sign-in,
        which imports the local stores. `options` are the constructor's (not `api_key`)."""
        client = cls(target, **options)
        client._calls.session = Session(client.channel, SessionState.local(device_id, device_secret),
                                        client._calls.timeout)
        try:
            client.sign_in()
        except BaseException:
            client.close()
            raise
        return client

    @property
    def device_secret(self) -> str:
        """A local session's device secret ("" otherwise)."""
        return self._calls.session.state.device_secret if self._calls.session else ""

    def sign_in(self) -> SignedIn:
        """Signs in (or starts the local session) now rather than on the first call, unless the
        session is fresh; what the session is, and what a first sign-in imported."""
        if not self._calls.session:
            raise ValueError("this client has no API key or local session to sign in with")
        return self._calls.session.sign_in()

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
        info, created = self._calls.run(ops.open_store(name, must_exist))
        return Store(self, info, created=created)

    def list_stores(self) -> list[StoreInfo]:
        return self._calls.run(ops.list_stores())


class Store:
    """One store: its model, reads at a generation, saves, contexts and the change feed."""

    def __init__(self, client: Client, info: StoreInfo, created: bool = False) -> None:
        self.client = client
        self._calls = client._calls
        self.info = info
        self.id = info.id
        self.name = info.name
        self.created = created

    # -- model --------------------------------------------------------------

    def register_model(self, model: md.Model, *, dry_run: bool = False) -> md.RegisterModelResponse:
        """Registers (or migrates to) `model`; a `ubiquity.v1.models_pb2.Model`."""
        return self._calls.run(ops.register_model(self.id, model, dry_run))

    def get_model(self) -> md.GetModelResponse:
        """The registered model and its version hash (`model` unset before the first registration)."""
        return self._calls.run(ops.get_model(self.id))

    # -- reads --------------------------------------------------------------

    def current_token(self) -> bytes:
        return self._calls.run(ops.current_token(self.id))

    def fetch(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
              sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
              result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
              at: bytes | None = None) -> FetchResult:
        """Fetches with an NSPredicate-format string (`"age > $min"`, arguments `{"min": 30}`), at the
        generation `at` names (a token from an earlier answer) or at the current one."""
        return self._calls.run(ops.fetch(ops.fetch_request(
            self.id, entity, predicate, arguments, sort, limit, offset, result_type, properties, at)))

    def fetch_stream(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
                     sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
                     result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
                     at: bytes | None = None) -> Iterator[FetchResult]:
        """As `fetch`, the results in pages as the server streams them (one generation throughout)."""
        return self._calls.stream(ops.fetch_stream(ops.fetch_request(
            self.id, entity, predicate, arguments, sort, limit, offset, result_type, properties, at)))

    def get(self, object_ids: Iterable[str], *, at: bytes | None = None) -> dict[str, Object]:
        """The objects with these IDs that exist (at `at`, or now), by ID; missing ones are absent."""
        return self._calls.run(ops.get(self.id, object_ids, at))

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
        return self._calls.run(ops.save(self.id, inserts, updates, deletes, expected_versions, merge_policy,
                                        author, client_transaction_id))

    def delete_history(self, through_token: bytes) -> bytes:
        """Trims the change history through `through_token` (inclusive); returns the oldest retained token.
        Feeds behind it end with HistoryExpired."""
        return self._calls.run(ops.delete_history(self.id, through_token))

    def acknowledge_store_event(self, event: StoreEvent) -> bool:
        """Tells the server this device flushed its work for `event` (a WILL_CHANGE received with
        `acknowledges_store_events=True`); whether a transition was still waiting for it."""
        return self._calls.run(ops.acknowledge_store_event(event))

    def history(self, after: bytes | None = None, *, entities: Iterable[str] = (), include_values: bool = False,
                page_size: int = 0) -> HistoryPage:
        """Committed transactions after the token `after` (None: from the oldest retained), a page
        at a time; a token older than the retained history raises HistoryExpired."""
        return self._calls.run(ops.fetch_history(self.id, after, entities, include_values, page_size))

    def deletions(self, after: bytes, *, entities: Iterable[str] = (), page_size: int = 0) -> DeletionsPage:
        """IDs deleted after `after` (exclusive), from the tombstone index, a page at a time."""
        return self._calls.run(ops.fetch_deletions(self.id, after, entities, page_size))

    # -- batches and maintenance ---------------------------------------------

    def batch_insert(self, entity: str, objects: Iterable[Mapping[str, ValueLike]], *, upsert: bool = False,
                     author: str = "", return_object_ids: bool = False) -> BatchResult:
        """Inserts many objects of one entity in one transaction (NSBatchInsertRequest); `upsert`
        updates objects that clash on a uniqueness constraint instead of failing."""
        return self._calls.run(ops.batch_insert(self.id, entity, objects, upsert, author, return_object_ids))

    def batch_update(self, entity: str, predicate: str, arguments: Mapping[str, object] | None = None, *,
                     values: Mapping[str, ValueLike], author: str = "") -> BatchResult:
        """Sets `values` on every object the predicate matches, in one transaction."""
        return self._calls.run(ops.batch_update(self.id, entity, predicate, arguments, values, author))

    def batch_delete(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
                     object_ids: Iterable[str] = (), author: str = "") -> BatchResult:
        """Deletes the objects the predicate matches (or those `object_ids`), in one transaction."""
        return self._calls.run(ops.batch_delete(self.id, entity, predicate, arguments, object_ids, author))

    def deduplicate(self, entity: str, unique_key: Sequence[str], *, batch_size: int = 0,
                    author: str = "") -> DeduplicateResult:
        """Keeps one object per value of `unique_key` and deletes the rest."""
        return self._calls.run(ops.deduplicate(self.id, entity, unique_key, batch_size, author))

    def seed(self, seed_id: str, inserts: Inserts, *, author: str = "") -> SeedResult:
        """Inserts initial data at most once per `seed_id`, however often it is called (and retried)."""
        return self._calls.run(ops.seed(self.id, seed_id, inserts, author))

    def export_baseline(self, *, at: bytes | None = None, batch_size: int = 0) -> Iterator[BaselineChunk]:
        """Every object at one generation (`at`, or now), in chunks; then subscribe from the token."""
        return self._calls.stream(ops.export_baseline(self.id, at, batch_size))

    def import_store(self, source: "Store | str", *, at: bytes | None = None,
                     deduplicate_by_constraints: bool = False, author: str = "") -> ImportResult:
        """Copies another store's objects (as of `at`, or now) into this one, relationships kept."""
        source_id = source if isinstance(source, str) else source.id
        return self._calls.run(ops.import_store(self.id, source_id, at, deduplicate_by_constraints, author))

    def replace_with(self, source: "Store | str") -> bytes:
        """Replaces this store's contents with another's (ReplaceStore); returns the new current
        token. Tokens from before are refused from now on (GenerationExpiredError)."""
        source_id = source if isinstance(source, str) else source.id
        return self._calls.run(ops.replace_store(self.id, source_id))

    def destroy(self) -> None:
        """Deletes the store and its file; its ID answers NOT_FOUND afterwards."""
        self._calls.run(ops.destroy_store(self.id))

    # -- contexts and feed --------------------------------------------------

    def context(self, name: str = "", *, author: str = "", merge_policy: MergePolicy = MergePolicy.ERROR,
                generation: Generation = "first_read") -> Context:
        """A unit of work on this store (see `Context`)."""
        return Context.create(self._calls, self.id, name=name, author=author, merge_policy=merge_policy,
                              generation=generation)

    def changes(self, *, start: Start = "now", entities: Iterable[str] = (), include_values: bool = False,
                exclude_authors: Iterable[str] = (),
                on_history_expired: Callable[[HistoryExpired], bytes | None] | None = None,
                on_store_event: StoreEventHook | None = None, reconnect_for: float = 60.0,
                acknowledges_store_events: bool = False, live_query: LiveQuery | None = None) -> ChangeFeed:
        """The store's change feed as an iterator of events (see `ChangeFeed`).

        `start` is "now", "oldest" or a token. "now" is read here, so every save that returns after
        this call is in the feed, however late the iteration starts. `on_store_event` sees each
        store transition (`StoreEvent`: WILL_CHANGE, then DID_CHANGE) as it passes.
        `acknowledges_store_events`: each WILL_CHANGE carries an `acknowledgement`, and the
        transition waits (up to its deadline) for `acknowledge_store_event` — call it from the hook
        once your pending work is saved.
        `live_query` follows that query's result set instead of raw changes (`entities` must then
        be empty): events of kind "live_query" with a `LiveQueryUpdate`, or `.live_query_updates()`.
        """
        if start == "now":
            start = self.current_token()
        resume = Resumer(self.id, start, _filter(entities, include_values, exclude_authors), reconnect_for,
                         renews_session=renews_session(self._calls.session),
                         acknowledges_store_events=acknowledges_store_events,
                         live_query=live_query.message() if live_query else None)
        return sync_feed(self._calls, resume, on_history_expired, on_store_event)


__all__ = ["Client", "Store", "StoreInfo", "TLS", "CHANNEL_OPTIONS"]
