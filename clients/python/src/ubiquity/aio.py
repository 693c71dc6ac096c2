"""The asyncio (`grpc.aio`) client: everything the sync client offers, awaited.

The same shapes as `ubiquity.Client`, `Store`, `Context` and `ChangeFeed`, with `await`,
`async with` and `async for`. Requests, result types, errors, save retries, session renewal and the
feed's resume rules are the sync client's (`_ops`, `_calls`, `context.ContextCore`,
`session.SessionState`, `feed.Resumer`); only the waiting differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from ubiquity.v1 import models_pb2 as md

from . import _ops as ops
from .accounts import AsyncAccounts
from .admin import AsyncAdmin
from ._calls import AsyncCaller, Metadata, authorization_of
from ._ops import Inserts, Updates
from .client import credentials_metadata, session_state, stubs
from .context import ContextCore, ContextState, Generation
from .errors import HistoryExpired, from_rpc_error
from .events import KeyValueChange, StoreEvent
from .feed import FeedEvent, Resumer, Start, Transaction, _filter, renews_session, session_ended
from .keyvalue import AsyncKeyValues
from .live import LiveQuery, LiveQueryUpdate
from .model import FetchResult, MergePolicy, Object, ResultType, SaveResult, SortKey, StoreInfo
from .results import BaselineChunk, BatchResult, DeduplicateResult, DeletionsPage, HistoryPage, ImportResult, SeedResult
from .session import AsyncSession, SessionState, SignedIn
from .tls import TLS, channel_settings
from .values import ValueLike

AsyncStoreEventHook = Callable[[StoreEvent], Awaitable[None]]


class Client:
    """`async with ubiquity.aio.Client(target, api_key=...) as client:` — see `ubiquity.Client`
    for the arguments (`interceptors` are `grpc.aio` client interceptors here)."""

    def __init__(self, target: str, *, tls: TLS | None = None,
                 channel_credentials: grpc.ChannelCredentials | None = None,
                 credentials: grpc.CallCredentials | None = None, metadata: Metadata = (),
                 timeout: float = 30.0, save_attempts: int = 3,
                 interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
                 api_key: str | None = None, device_id: str | None = None,
                 local_device_secret: str | None = None, operator_key: str | None = None) -> None:
        metadata = credentials_metadata(metadata, api_key, operator_key)
        state = session_state(api_key, device_id, local_device_secret)
        creds, options = channel_settings(tls, channel_credentials, credentials)
        if creds is not None:
            self.channel = grpc.aio.secure_channel(target, creds, options=options, interceptors=interceptors)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
        session = AsyncSession(self.channel, state, timeout) if state else None
        self._calls = AsyncCaller(stubs(self.channel), timeout, metadata, save_attempts, session)
        self.key_values = AsyncKeyValues(self._calls)
        """The account's key-value store (`ubiquity.keyvalue.AsyncKeyValues`)."""
        self.admin = AsyncAdmin(self._calls)
        """The server's Admin calls (`ubiquity.admin.AsyncAdmin`); backups need `operator_key`."""
        self.accounts = AsyncAccounts(self._calls)
        """The operator's account calls (`ubiquity.accounts.AsyncAccounts`); they need `operator_key`."""

    @classmethod
    async def start_local_session(cls, target: str, device_id: str, device_secret: str | None = None,
                                  **options: Any) -> "Client":
        """As `ubiquity.Client.start_local_session`: `await ubiquity.aio.Client.start_local_session(...)`."""
        client = cls(target, **options)
        client._calls.session = AsyncSession(client.channel, SessionState.local(device_id, device_secret),
                                             client._calls.timeout)
        try:
            await client.sign_in()
        except BaseException:
            await client.close()
            raise
        return client

    @property
    def device_secret(self) -> str:
        """A local session's device secret ("" otherwise)."""
        return self._calls.session.state.device_secret if self._calls.session else ""

    async def sign_in(self) -> SignedIn:
        """As `ubiquity.Client.sign_in`."""
        if not self._calls.session:
            raise ValueError("this client has no API key or local session to sign in with")
        return await self._calls.session.sign_in()

    async def close(self) -> None:
        await self.channel.close()

    async def sign_out(self) -> None:
        """Ends this client's session (signed in with `api_key`); a later call signs in again."""
        if self._calls.session:
            await self._calls.session.sign_out()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def open_store(self, name: str, *, must_exist: bool = False) -> "Store":
        info, created = await self._calls.run(ops.open_store(name, must_exist))
        return Store(self, info, created=created)

    async def list_stores(self) -> list[StoreInfo]:
        return await self._calls.run(ops.list_stores())


class Store:
    """`ubiquity.Store`, awaited: each method's arguments and result are the sync one's."""

    def __init__(self, client: Client, info: StoreInfo, created: bool = False) -> None:
        self.client = client
        self._calls = client._calls
        self.info = info
        self.id = info.id
        self.name = info.name
        self.created = created

    async def register_model(self, model: md.Model, *, dry_run: bool = False) -> md.RegisterModelResponse:
        return await self._calls.run(ops.register_model(self.id, model, dry_run))

    async def get_model(self) -> md.GetModelResponse:
        return await self._calls.run(ops.get_model(self.id))

    async def current_token(self) -> bytes:
        return await self._calls.run(ops.current_token(self.id))

    async def fetch(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
                    sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
                    result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
                    at: bytes | None = None) -> FetchResult:
        return await self._calls.run(ops.fetch(ops.fetch_request(
            self.id, entity, predicate, arguments, sort, limit, offset, result_type, properties, at)))

    def fetch_stream(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
                     sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
                     result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
                     at: bytes | None = None) -> AsyncIterator[FetchResult]:
        """`async for page in store.fetch_stream(...)`."""
        return self._calls.stream(ops.fetch_stream(ops.fetch_request(
            self.id, entity, predicate, arguments, sort, limit, offset, result_type, properties, at)))

    async def get(self, object_ids: Iterable[str], *, at: bytes | None = None) -> dict[str, Object]:
        return await self._calls.run(ops.get(self.id, object_ids, at))

    async def save(self, *, inserts: Inserts | None = None, updates: Updates | None = None,
                   deletes: Iterable[str] = (), expected_versions: Mapping[str, int] | None = None,
                   merge_policy: MergePolicy = MergePolicy.ERROR, author: str = "",
                   client_transaction_id: str | None = None) -> SaveResult:
        """As `ubiquity.Store.save`: retried with one client transaction ID while the outcome is unknown."""
        return await self._calls.run(ops.save(self.id, inserts, updates, deletes, expected_versions, merge_policy,
                                              author, client_transaction_id))

    async def delete_history(self, through_token: bytes) -> bytes:
        return await self._calls.run(ops.delete_history(self.id, through_token))

    async def history(self, after: bytes | None = None, *, entities: Iterable[str] = (),
                      include_values: bool = False, page_size: int = 0) -> HistoryPage:
        return await self._calls.run(ops.fetch_history(self.id, after, entities, include_values, page_size))

    async def deletions(self, after: bytes, *, entities: Iterable[str] = (), page_size: int = 0) -> DeletionsPage:
        return await self._calls.run(ops.fetch_deletions(self.id, after, entities, page_size))

    async def batch_insert(self, entity: str, objects: Iterable[Mapping[str, ValueLike]], *, upsert: bool = False,
                           author: str = "", return_object_ids: bool = False) -> BatchResult:
        return await self._calls.run(ops.batch_insert(self.id, entity, objects, upsert, author, return_object_ids))

    async def batch_update(self, entity: str, predicate: str, arguments: Mapping[str, object] | None = None, *,
                           values: Mapping[str, ValueLike], author: str = "") -> BatchResult:
        return await self._calls.run(ops.batch_update(self.id, entity, predicate, arguments, values, author))

    async def batch_delete(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None,
                           *, object_ids: Iterable[str] = (), author: str = "") -> BatchResult:
        return await self._calls.run(ops.batch_delete(self.id, entity, predicate, arguments, object_ids, author))

    async def deduplicate(self, entity: str, unique_key: Sequence[str], *, batch_size: int = 0,
                          author: str = "") -> DeduplicateResult:
        return await self._calls.run(ops.deduplicate(self.id, entity, unique_key, batch_size, author))

    async def seed(self, seed_id: str, inserts: Inserts, *, author: str = "") -> SeedResult:
        return await self._calls.run(ops.seed(self.id, seed_id, inserts, author))

    def export_baseline(self, *, at: bytes | None = None, batch_size: int = 0) -> AsyncIterator[BaselineChunk]:
        """`async for chunk in store.export_baseline()`."""
        return self._calls.stream(ops.export_baseline(self.id, at, batch_size))

    async def import_store(self, source: "Store | str", *, at: bytes | None = None,
                           deduplicate_by_constraints: bool = False, author: str = "") -> ImportResult:
        source_id = source if isinstance(source, str) else source.id
        return await self._calls.run(ops.import_store(self.id, source_id, at, deduplicate_by_constraints, author))

    async def replace_with(self, source: "Store | str") -> bytes:
        source_id = source if isinstance(source, str) else source.id
        return await self._calls.run(ops.replace_store(self.id, source_id))

    async def destroy(self) -> None:
        await self._calls.run(ops.destroy_store(self.id))

    async def context(self, name: str = "", *, author: str = "", merge_policy: MergePolicy = MergePolicy.ERROR,
                      generation: Generation = "first_read") -> "Context":
        """A unit of work on this store: `async with await store.context() as ctx:`."""
        state = await self._calls.run(ContextCore.create_call(self.id, name, author, merge_policy, generation))
        return Context(self._calls, state)

    async def changes(self, *, start: Start = "now", entities: Iterable[str] = (), include_values: bool = False,
                      exclude_authors: Iterable[str] = (),
                      on_history_expired: Callable[[HistoryExpired], Awaitable[bytes | None]] | None = None,
                      on_store_event: AsyncStoreEventHook | None = None,
                      reconnect_for: float = 60.0, acknowledges_store_events: bool = False,
                      live_query: LiveQuery | None = None) -> "ChangeFeed":
        """The change feed as an async iterator; "now" is read before this returns. The hooks are
        coroutines (`on_store_event` is awaited before the event is yielded)."""
        if start == "now":
            start = await self.current_token()
        resume = Resumer(self.id, start, _filter(entities, include_values, exclude_authors), reconnect_for,
                         renews_session=renews_session(self._calls.session),
                         acknowledges_store_events=acknowledges_store_events,
                         live_query=live_query.message() if live_query else None)
        return ChangeFeed(self._calls, resume, on_history_expired, on_store_event)

    async def acknowledge_store_event(self, event: StoreEvent) -> bool:
        """`ubiquity.Store.acknowledge_store_event`, awaited."""
        return await self._calls.run(ops.acknowledge_store_event(event))


class Context(ContextCore):
    """`ubiquity.Context`, awaited; `async with` closes it on the server."""

    def __init__(self, calls: AsyncCaller, state: Any) -> None:
        super().__init__(state)
        self._calls = calls

    async def child(self, name: str = "") -> "Context":
        """A nested context whose save goes into this one (not the store)."""
        return Context(self._calls, await self._calls.run(self._child_call(name)))

    async def insert(self, entity: str, values: Mapping[str, ValueLike],
                     relationships: Mapping[str, Sequence[str]] | None = None) -> str:
        return await self._calls.run(self._insert_call(entity, values, relationships))

    async def update(self, object_id: str, values: Mapping[str, ValueLike],
                     relationships: Mapping[str, Sequence[str]] | None = None) -> None:
        await self._calls.run(self._update_call(object_id, values, relationships))

    async def delete(self, *object_ids: str) -> None:
        await self._calls.run(self._delete_call(object_ids))

    async def fetch(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
                    sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
                    result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
                    include_pending: bool = True) -> FetchResult:
        return await self._calls.run(self._fetch_call(entity, predicate, arguments, sort, limit, offset,
                                                      result_type, properties, include_pending))

    async def refresh_state(self) -> ContextState:
        return await self._calls.run(self._state_call("GetState"))

    async def save(self, *, client_transaction_id: str | None = None, dry_run: bool = False) -> SaveResult:
        return await self._calls.run(self._save_call(client_transaction_id, dry_run))

    async def rollback(self) -> None:
        await self._calls.run(self._state_call("Rollback"))

    async def reset(self) -> None:
        await self._calls.run(self._state_call("Reset"))

    async def refresh(self, *, merge_changes: bool = False) -> None:
        await self._calls.run(self._refresh_call(merge_changes))

    async def pin(self, generation: Generation) -> None:
        await self._calls.run(self._pin_call(generation))

    async def close(self) -> None:
        await self._calls.run(self._close_call())

    async def __aenter__(self) -> "Context":
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


class ChangeFeed:
    """`async for event in feed` — resumes from its last token like `ubiquity.ChangeFeed`."""

    def __init__(self, calls: AsyncCaller, resume: Resumer,
                 on_history_expired: Callable[[HistoryExpired], Awaitable[bytes | None]] | None,
                 on_store_event: AsyncStoreEventHook | None = None) -> None:
        self._calls = calls
        self._resume = resume
        self._on_expired = on_history_expired
        self._on_store_event = on_store_event
        self._call: Any = None
        self._sent = ""
        self._closed = False

    @property
    def token(self) -> bytes | None:
        return self._resume.token

    @property
    def reconnects(self) -> int:
        return self._resume.reconnects

    def __aiter__(self) -> "ChangeFeed":
        return self

    async def __anext__(self) -> FeedEvent:
        while not self._closed:
            try:
                if self._call is None:
                    # metadata is asked at each (re)subscribe, so a renewed session is used
                    metadata = await self._calls.metadata()
                    self._sent = authorization_of(metadata)
                    self._call = self._calls.stub("changes").Subscribe(self._resume.request(), metadata=metadata)
                r = await self._call.read()
            except grpc.aio.AioRpcError as e:
                self._call = None
                if self._closed:
                    break
                err = from_rpc_error(e)
                if session_ended(err) and self._calls.session and self._resume.renews_session:
                    self._calls.session.forget(self._sent)
                try:
                    await asyncio.sleep(self._resume.failed(err, asyncio.get_running_loop().time()))
                except HistoryExpired as expired:
                    token = await self._on_expired(expired) if self._on_expired else None
                    self._resume.rebaselined(expired, token)
                continue
            if r is grpc.aio.EOF:
                self._call = None  # the server ended the stream: resume
                continue
            event = self._resume.received(r, self._sent)
            if event.store_event is not None and self._on_store_event:
                await self._on_store_event(event.store_event)
            return event
        raise StopAsyncIteration

    async def transactions(self) -> AsyncIterator[Transaction]:
        async for event in self:
            for t in event.transactions:
                yield t

    async def key_value_changes(self) -> AsyncIterator[KeyValueChange]:
        async for event in self:
            if event.key_value_change is not None:
                yield event.key_value_change

    async def live_query_updates(self) -> AsyncIterator[LiveQueryUpdate]:
        async for event in self:
            if event.live_query is not None:
                yield event.live_query

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()


__all__ = ["Client", "Store", "Context", "ChangeFeed"]
