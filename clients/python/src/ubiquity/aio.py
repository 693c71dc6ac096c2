"""The asyncio (`grpc.aio`) client: stores, fetches, saves with safe retries, the change feed.

The same shapes as the synchronous client, with `await` and `async for`; requests, results, errors
and the feed's resume rules are shared with it. Contexts are not here yet (use the sync client).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from ubiquity.v1 import changes_pb2_grpc
from ubiquity.v1 import models_pb2 as md, models_pb2_grpc
from ubiquity.v1 import objects_pb2 as ob
from ubiquity.v1 import stores_pb2 as st, stores_pb2_grpc

from ._calls import RETRYABLE, Metadata, retry_delays
from .client import CHANNEL_OPTIONS, Inserts, StoreInfo, Updates, save_request
from .errors import HistoryExpired, UbiquityError, from_rpc_error
from .feed import FeedEvent, Resumer, Start, Transaction, _filter
from .session import Session
from .model import FetchResult, MergePolicy, Object, ResultType, SaveResult, SortKey, fetch_spec


class Client:
    """`async with ubiquity.aio.Client(target) as client:` — see `ubiquity.Client` for the arguments."""

    def __init__(self, target: str, *, channel_credentials: grpc.ChannelCredentials | None = None,
                 metadata: Metadata = (), timeout: float = 30.0, save_attempts: int = 3,
                 api_key: str | None = None, device_id: str | None = None) -> None:
        if channel_credentials is not None:
            self.channel = grpc.aio.secure_channel(target, channel_credentials, options=CHANNEL_OPTIONS)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._metadata = tuple(metadata)
        # Sign-in uses a blocking channel of its own: it runs once per session lifetime.
        self._session_channel: grpc.Channel | None = None
        self._session: Session | None = None
        if api_key:
            self._session_channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS) if channel_credentials is None \
                else grpc.secure_channel(target, channel_credentials, options=CHANNEL_OPTIONS)
            self._session = Session(self._session_channel, api_key, device_id or "python-client", timeout)
        self.timeout = timeout
        self.save_attempts = save_attempts
        self._stores = stores_pb2_grpc.StoresStub(self.channel)
        self._models = models_pb2_grpc.ModelsStub(self.channel)
        self._changes = changes_pb2_grpc.ChangesStub(self.channel)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What every call sends: the caller's metadata and, when signed in, the session's."""
        return self._metadata + (self._session.metadata() if self._session else ())

    async def close(self) -> None:
        if self._session_channel is not None:
            self._session_channel.close()
        await self.channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _unary(self, method: Callable[..., Awaitable[Any]], request: object) -> Any:
        try:
            return await method(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None

    async def open_store(self, name: str, *, must_exist: bool = False) -> "Store":
        r: st.OpenStoreResponse = await self._unary(
            self._stores.OpenStore, st.OpenStoreRequest(name=name, must_exist=must_exist))
        return Store(self, StoreInfo.of(r.store), created=r.created)

    async def list_stores(self) -> list[StoreInfo]:
        r: st.ListStoresResponse = await self._unary(self._stores.ListStores, st.ListStoresRequest())
        return [StoreInfo.of(s) for s in r.stores]


class Store:
    def __init__(self, client: Client, info: StoreInfo, created: bool = False) -> None:
        self.client = client
        self.info = info
        self.id = info.id
        self.name = info.name
        self.created = created

    async def register_model(self, model: md.Model, *, dry_run: bool = False) -> md.RegisterModelResponse:
        r: md.RegisterModelResponse = await self.client._unary(
            self.client._models.RegisterModel, md.RegisterModelRequest(store_id=self.id, model=model, dry_run=dry_run))
        return r

    async def current_token(self) -> bytes:
        r: st.CurrentGenerationResponse = await self.client._unary(
            self.client._stores.CurrentGeneration, st.CurrentGenerationRequest(store_id=self.id))
        return r.token

    async def fetch(self, entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None, *,
                    sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
                    result_type: ResultType = ResultType.OBJECTS, properties: Iterable[str] = (),
                    at: bytes | None = None) -> FetchResult:
        spec = fetch_spec(entity, predicate, arguments, sort, limit, offset, result_type, properties)
        r: ob.FetchResults = await self.client._unary(self.client._stores.Fetch, st.FetchRequest(
            store_id=self.id, fetch=spec, at=ob.ReadGeneration(token=at or b"")))
        return FetchResult.of(r)

    async def get(self, object_ids: Iterable[str], *, at: bytes | None = None) -> dict[str, Object]:
        r: st.GetObjectsResponse = await self.client._unary(self.client._stores.GetObjects, st.GetObjectsRequest(
            store_id=self.id, object_ids=list(object_ids), at=ob.ReadGeneration(token=at or b"")))
        return {o.object_id: Object.of(o) for o in r.objects}

    async def save(self, *, inserts: Inserts | None = None, updates: Updates | None = None,
                   deletes: Iterable[str] = (), expected_versions: Mapping[str, int] | None = None,
                   merge_policy: MergePolicy = MergePolicy.ERROR, author: str = "",
                   client_transaction_id: str | None = None) -> SaveResult:
        """As `ubiquity.Store.save`: retried with one client transaction ID while the outcome is unknown."""
        txid = client_transaction_id or str(uuid.uuid4())
        request = save_request(self.id, inserts, updates, deletes, expected_versions, merge_policy, author)(txid)
        for delay in retry_delays(self.client.save_attempts):
            try:
                return SaveResult.of(await self.client._unary(self.client._stores.Save, request), txid)
            except UbiquityError as e:
                if e.code not in RETRYABLE:
                    raise
            await asyncio.sleep(delay)
        return SaveResult.of(await self.client._unary(self.client._stores.Save, request), txid)

    async def changes(self, *, start: Start = "now", entities: Iterable[str] = (), include_values: bool = False,
                      exclude_authors: Iterable[str] = (),
                      on_history_expired: Callable[[HistoryExpired], Awaitable[bytes | None]] | None = None,
                      reconnect_for: float = 60.0) -> "ChangeFeed":
        """The change feed as an async iterator; "now" is read before this returns."""
        if start == "now":
            start = await self.current_token()
        resume = Resumer(self.id, start, _filter(entities, include_values, exclude_authors), reconnect_for)
        return ChangeFeed(self.client, resume, on_history_expired)


class ChangeFeed:
    """`async for event in feed` — resumes from its last token like `ubiquity.ChangeFeed`."""

    def __init__(self, client: Client, resume: Resumer,
                 on_history_expired: Callable[[HistoryExpired], Awaitable[bytes | None]] | None) -> None:
        self._client = client
        self._resume = resume
        self._on_expired = on_history_expired
        self._call: Any = None
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
            if self._call is None:
                self._call = self._client._changes.Subscribe(self._resume.request(), metadata=self._client.metadata)
            try:
                r = await self._call.read()
            except grpc.aio.AioRpcError as e:
                self._call = None
                if self._closed:
                    break
                err = from_rpc_error(e)
                try:
                    await asyncio.sleep(self._resume.failed(err, asyncio.get_running_loop().time()))
                except HistoryExpired as expired:
                    token = await self._on_expired(expired) if self._on_expired else None
                    self._resume.rebaselined(expired, token)
                continue
            if r is grpc.aio.EOF:
                self._call = None  # the server ended the stream: resume
                continue
            return self._resume.received(r)
        raise StopAsyncIteration

    async def transactions(self) -> AsyncIterator[Transaction]:
        async for event in self:
            for t in event.transactions:
                yield t

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()


__all__ = ["Client", "Store", "ChangeFeed"]
