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

from ._calls import Metadata
from .errors import HistoryExpired, UbiquityError, from_rpc_error
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
    "store_event", "key_value_change" or "live_query"; `transactions` is filled for the first."""

    kind: str
    resume_token: bytes
    resume_generation: int
    transactions: list[Transaction]
    raw: ch.SubscribeResponse = field(repr=False)


def transaction_of(t: ch.Transaction) -> Transaction:
    changes = [Change(ch.Change.Kind.Name(c.kind).removeprefix("KIND_").lower(), c.entity, c.object_id,
                      list(c.changed_properties), from_values(c.values)) for c in t.changes]
    return Transaction(t.token, t.generation, t.commit_time.ToDatetime(tzinfo=timezone.utc), t.author,
                       t.context_name, changes)


def _event(r: ch.SubscribeResponse) -> FeedEvent:
    kind = r.WhichOneof("event") or "progress"
    return FeedEvent(kind, r.resume_token, r.resume_generation,
                     [transaction_of(t) for t in r.transactions.transactions], r)


class Resumer:
    """Where a feed is and what to do when its stream fails; shared by the sync and asyncio feeds.

    A plain state holder without I/O, so the resume rules live in one place: resubscribe from the
    last resume token after a resumable failure (backing off, for at most `reconnect_for` seconds
    of consecutive failures), hand HISTORY_EXPIRED to the hook, raise everything else.
    """

    def __init__(self, store_id: str, start: Start, filter: ch.ChangeFilter, reconnect_for: float) -> None:
        self.store_id = store_id
        self.start: Start = start
        self.filter = filter
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
        request = ch.SubscribeRequest(store_id=self.store_id, filter=self.filter)
        getattr(request, "from").CopyFrom(point)  # `from` is a Python keyword
        return request

    def received(self, r: ch.SubscribeResponse) -> FeedEvent:
        if r.resume_token:
            self.token = r.resume_token
        self._failing_since = None
        self._delay = 0.05
        return _event(r)

    def failed(self, err: UbiquityError, now: float) -> float:
        """The delay before subscribing again; raises `err` when the feed cannot go on.
        HistoryExpired is raised too: the caller offers it to its hook (`rebaselined`)."""
        # An expired session's stream ends with SESSION_EXPIRED and its resume token: a client
        # signed in with an API key resubscribes with its refreshed session.
        expired = err.code == grpc.StatusCode.UNAUTHENTICATED and err.reason == "SESSION_EXPIRED"
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


def _filter(entities: Iterable[str], include_values: bool, exclude_authors: Iterable[str]) -> ch.ChangeFilter:
    return ch.ChangeFilter(entities=list(entities), include_values=include_values,
                           exclude_authors=list(exclude_authors))


class ChangeFeed(Iterator[FeedEvent]):
    """Iterate for events; `token` is where a new feed would resume. `close()` ends it from any thread."""

    def __init__(self, stub: changes_pb2_grpc.ChangesStub, metadata: Metadata | Callable[[], Metadata], store_id: str, *,
                 start: Start, entities: Iterable[str], include_values: bool, exclude_authors: Iterable[str],
                 on_history_expired: Callable[[HistoryExpired], bytes | None] | None,
                 reconnect_for: float) -> None:
        self._stub = stub
        # a callable is asked at each (re)subscribe, so a refreshed session is used
        self._metadata = metadata if callable(metadata) else (lambda m=tuple(metadata): m)
        self.store_id = store_id
        self._resume = Resumer(store_id, start, _filter(entities, include_values, exclude_authors), reconnect_for)
        self._on_expired = on_history_expired
        self._call: grpc.Future | None = None  # type: ignore[type-arg]
        self._stream: Iterator[ch.SubscribeResponse] | None = None
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
                call = self._stub.Subscribe(self._resume.request(), metadata=tuple(self._metadata()))
                self._call, self._stream = call, call
            assert self._stream is not None
            try:
                return self._resume.received(next(self._stream))
            except StopIteration:
                self._stream = None  # the server ended the stream: resume
            except grpc.RpcError as e:
                self._stream = None
                if self._closed:
                    break
                err = from_rpc_error(e)
                try:
                    time.sleep(self._resume.failed(err, time.monotonic()))
                except HistoryExpired as expired:
                    self._resume.rebaselined(expired, self._on_expired(expired) if self._on_expired else None)
        raise StopIteration

    def transactions(self) -> Iterator[Transaction]:
        """Only the committed transactions, in order."""
        for event in self:
            yield from event.transactions

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()


__all__ = ["ChangeFeed", "FeedEvent", "Transaction", "Change", "Start", "UbiquityError"]
