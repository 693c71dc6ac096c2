"""The change feed (`Changes.Subscribe`) as a Python iterator that survives reconnects.

Each event carries the resume token the server sent with it; the feed keeps the last one and, when
the stream breaks (server restart or drain, network, a slow-subscriber cut), subscribes again from
it, so no transaction is skipped or repeated. HISTORY_EXPIRED cannot be resumed: the
`on_history_expired` hook re-baselines (for instance a fetch at `err.current_token`) and returns
the token to continue from, or None to end the feed with the error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, Union

import grpc

from ubiquity.v1 import changes_pb2 as ch, changes_pb2_grpc

from ._calls import Caller, Metadata, authorization_of
from .errors import HistoryExpired, UbiquityError, from_rpc_error
from .events import KeyValueChange, StoreEvent
from .live import LiveQueryUpdate
from .values import PyValue, from_values

Start = Union[Literal["now", "oldest"], bytes]

# Failures after which the feed subscribes again from its last token.
_RESUMABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED,
                        grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})


@dataclass(frozen=True)
class Change:
    kind: str  # "insert", "update", "delete"
    entity: str
    object_id: str
    changed_properties: list[str]
    values: dict[str, PyValue]  # with include_values


@dataclass(frozen=True)
class Transaction:
    token: bytes
    generation: int
    commit_time: datetime
    author: str
    context_name: str
    changes: list[Change]


@dataclass(frozen=True)
class FeedEvent:
    """One feed message. `kind` is "transactions", "caught_up", "progress", "cursor_at_risk",
    "store_event", "key_value_change" or "live_query"; `transactions` is filled for the first,
    `store_event` (a typed `StoreEvent`), `key_value_change` (a typed `KeyValueChange`) and
    `live_query` (a typed `LiveQueryUpdate`) for theirs."""

    kind: str
    resume_token: bytes
    resume_generation: int
    transactions: list[Transaction]
    raw: ch.SubscribeResponse = field(repr=False)
    store_event: StoreEvent | None = None
    key_value_change: KeyValueChange | None = None
    live_query: LiveQueryUpdate | None = None


def transaction_of(t: ch.Transaction) -> Transaction:
    changes = [Change(ch.Change.Kind.Name(c.kind).removeprefix("KIND_").lower(), c.entity, c.object_id,
                      list(c.changed_properties), from_values(c.values)) for c in t.changes]
    return Transaction(t.token, t.generation, t.commit_time.ToDatetime(tzinfo=timezone.utc), t.author,
                       t.context_name, changes)


def _event(r: ch.SubscribeResponse, authorization: str) -> FeedEvent:
    kind = r.WhichOneof("event") or "progress"
    store_event = StoreEvent.of(r.store_event, r.resume_token, r.resume_generation, authorization) \
        if kind == "store_event" else None
    kv_change = KeyValueChange.of(r.key_value_change, r.resume_token, r.resume_generation) \
        if kind == "key_value_change" else None
    live = LiveQueryUpdate.of(r.live_query) if kind == "live_query" else None
    return FeedEvent(kind, r.resume_token, r.resume_generation,
                     [transaction_of(t) for t in r.transactions.transactions], r, store_event, kv_change, live)


class Resumer:
    """Where a feed is and what to do when its stream fails; shared by the sync and asyncio feeds.

    A plain state holder without I/O, so the resume rules live in one place: resubscribe from the
    last resume token after a resumable failure (backing off, for at most `reconnect_for` seconds
    of consecutive failures), hand HISTORY_EXPIRED to the hook, raise everything else.
    """

    def __init__(self, store_id: str, start: Start, filter: ch.ChangeFilter, reconnect_for: float, *,
                 key_values: ch.KeyValueSubscription | None = None, renews_session: bool = False,
                 acknowledges_store_events: bool = False, live_query: ch.LiveQuery | None = None) -> None:
        self.store_id = store_id
        # set: the query's result set is followed instead of raw changes (docs/changes.md)
        self.live_query = live_query
        # WILL_CHANGEs carry an acknowledgement the caller answers (docs/lifecycle.md)
        self.acknowledges_store_events = acknowledges_store_events
        self.start: Start = start
        self.filter = filter
        # set: the account's key-value feed (store_id and filter then unused)
        self.key_values = key_values
        # A client that signs in by itself resubscribes after its session was revoked (a
        # sign-out: docs/lifecycle.md) as after one that expired, from the DID_CHANGE's token.
        self.renews_session = renews_session
        self.token: bytes | None = start if isinstance(start, bytes) else None
        self.reconnect_for = reconnect_for
        self.reconnects = 0
        self._failing_since: float | None = None
        self._delay = 0.05

    def request(self) -> ch.SubscribeRequest:
        start = self.token if self.token is not None else self.start
        if isinstance(start, bytes):
            point = ch.StartPoint(token=start)
        elif start == "oldest":
            point = ch.StartPoint(oldest=True)
        else:
            point = ch.StartPoint(now=True)
        if self.key_values is not None:
            request = ch.SubscribeRequest(key_values=self.key_values)
        else:
            request = ch.SubscribeRequest(store_id=self.store_id, filter=self.filter, live_query=self.live_query,
                                          acknowledges_store_events=self.acknowledges_store_events)
        getattr(request, "from").CopyFrom(point)  # `from` is a Python keyword
        return request

    def received(self, r: ch.SubscribeResponse, authorization: str = "") -> FeedEvent:
        """`authorization`: what the stream sent (a store event's acknowledgement goes with it)."""
        if r.resume_token:
            self.token = r.resume_token
        self._failing_since = None
        self._delay = 0.05
        return _event(r, authorization)

    def failed(self, err: UbiquityError, now: float) -> float:
        """The delay before subscribing again; raises `err` when the feed cannot go on.
        HistoryExpired is raised too: the caller offers it to its hook (`rebaselined`)."""
        # An expired session's stream ends with SESSION_EXPIRED and its resume token: a client
        # signed in with an API key resubscribes with its refreshed session.
        expired = session_ended(err) and (err.reason == "SESSION_EXPIRED" or self.renews_session)
        if isinstance(err, HistoryExpired) or (err.code not in _RESUMABLE and not expired):
            raise err
        resume_token = getattr(err, "resume_token", None)
        if resume_token:
            self.token = resume_token
        if self._failing_since is None:
            self._failing_since = now
        if now - self._failing_since > self.reconnect_for:
            raise err
        self.reconnects += 1
        delay = self._delay
        self._delay = min(self._delay * 2, 1.0)
        return delay

    def rebaselined(self, err: HistoryExpired, token: bytes | None) -> None:
        if token is None:
            raise err
        self.token = token


def session_ended(err: UbiquityError) -> bool:
    """Whether a stream ended because its session did (expired, or revoked by a sign-out)."""
    return err.code == grpc.StatusCode.UNAUTHENTICATED and err.reason in ("SESSION_EXPIRED", "SESSION_REVOKED")


def renews_session(session: object | None) -> bool:
    """Whether a feed resubscribes after its session was revoked: with an API key, yes (a sign-out
    ends the session, the client signs in again). A local session's end is the first sign-in's
    import taking the local store away: its feed ends (docs/lifecycle.md)."""
    state = getattr(session, "state", None)
    return state is not None and not state.is_local


def _filter(entities: Iterable[str], include_values: bool, exclude_authors: Iterable[str]) -> ch.ChangeFilter:
    return ch.ChangeFilter(entities=list(entities), include_values=include_values,
                           exclude_authors=list(exclude_authors))


StoreEventHook = Callable[[StoreEvent], None]


class ChangeFeed(Iterator[FeedEvent]):
    """Iterate for events; `token` is where a new feed would resume. `close()` ends it from any thread.

    `on_store_event` is called with each store transition (`StoreEvent`) as it passes, before the
    event is yielded, so a caller iterating `transactions()` (which skips them) still saves its
    work on WILL_CHANGE and drops its contexts on DID_CHANGE. `forget_session` (given the
    `authorization` a stream used) is told when the server ended that session, so the next
    subscribe signs in afresh.
    """

    def __init__(self, stub: changes_pb2_grpc.ChangesStub, metadata: Metadata | Callable[[], Metadata],
                 resume: Resumer, *, on_history_expired: Callable[[HistoryExpired], bytes | None] | None = None,
                 on_store_event: StoreEventHook | None = None,
                 forget_session: Callable[[str], None] | None = None) -> None:
        self._stub = stub
        # a callable is asked at each (re)subscribe, so a refreshed session is used
        self._metadata = metadata if callable(metadata) else (lambda m=tuple(metadata): m)
        self.store_id = resume.store_id
        self._resume = resume
        self._on_expired = on_history_expired
        self._on_store_event = on_store_event
        self._forget_session = forget_session
        self._call: grpc.Future | None = None  # type: ignore[type-arg]
        self._stream: Iterator[ch.SubscribeResponse] | None = None
        self._sent = ""
        self._closed = False

    @property
    def token(self) -> bytes | None:
        return self._resume.token

    @property
    def reconnects(self) -> int:
        return self._resume.reconnects

    def __iter__(self) -> "ChangeFeed":
        return self

    def __next__(self) -> FeedEvent:
        while not self._closed:
            if self._stream is None:
                metadata = tuple(self._metadata())
                self._sent = authorization_of(metadata)
                call = self._stub.Subscribe(self._resume.request(), metadata=metadata)
                self._call, self._stream = call, call
            assert self._stream is not None
            try:
                event = self._resume.received(next(self._stream), self._sent)
            except StopIteration:
                self._stream = None  # the server ended the stream: resume
                continue
            except grpc.RpcError as e:
                self._stream = None
                if self._closed:
                    break
                err = from_rpc_error(e)
                if session_ended(err) and self._forget_session:
                    self._forget_session(self._sent)
                try:
                    time.sleep(self._resume.failed(err, time.monotonic()))
                except HistoryExpired as expired:
                    self._resume.rebaselined(expired, self._on_expired(expired) if self._on_expired else None)
                continue
            if event.store_event is not None and self._on_store_event:
                self._on_store_event(event.store_event)
            return event
        raise StopIteration

    def transactions(self) -> Iterator[Transaction]:
        """Only the committed transactions, in order."""
        for event in self:
            yield from event.transactions

    def key_value_changes(self) -> Iterator[KeyValueChange]:
        """Only the key-value changes (a key-value feed: `client.key_values.changes()`), in order."""
        for event in self:
            if event.key_value_change is not None:
                yield event.key_value_change

    def live_query_updates(self) -> Iterator[LiveQueryUpdate]:
        """Only the live query's updates (a feed opened with `live_query=`), in order."""
        for event in self:
            if event.live_query is not None:
                yield event.live_query

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()


def sync_feed(calls: Caller, resume: Resumer, on_history_expired: Callable[[HistoryExpired], bytes | None] | None,
              on_store_event: StoreEventHook | None) -> ChangeFeed:
    """A feed on a client's channel, with its session (renewed at each subscribe). A local
    session is not forgotten when it ends: the client must not start the device afresh unasked."""
    forget = calls.session.forget if calls.session and resume.renews_session else None
    return ChangeFeed(calls.stub("changes"), lambda: calls.metadata, resume, on_history_expired=on_history_expired,
                      on_store_event=on_store_event, forget_session=forget)


__all__ = ["ChangeFeed", "FeedEvent", "Transaction", "Change", "Start", "UbiquityError", "Resumer", "StoreEventHook"]
