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


def _event(r: ch.SubscribeResponse) -> FeedEvent:
    kind = r.WhichOneof("event") or "progress"
    txs = []
    for t in r.transactions.transactions:
        changes = [Change(ch.Change.Kind.Name(c.kind).removeprefix("KIND_").lower(), c.entity, c.object_id,
                          list(c.changed_properties), from_values(c.values)) for c in t.changes]
        txs.append(Transaction(t.token, t.generation, t.commit_time.ToDatetime(tzinfo=timezone.utc),
                               t.author, t.context_name, changes))
    return FeedEvent(kind, r.resume_token, r.resume_generation, txs, r)


class ChangeFeed(Iterator[FeedEvent]):
    """Iterate for events; `token` is where a new feed would resume. `close()` ends it from any thread."""

    def __init__(self, stub: changes_pb2_grpc.ChangesStub, metadata: Metadata, store_id: str, *,
                 start: Start, entities: Iterable[str], include_values: bool, exclude_authors: Iterable[str],
                 on_history_expired: Callable[[HistoryExpired], bytes | None] | None,
                 reconnect_for: float) -> None:
        self._stub = stub
        self._metadata = tuple(metadata)
        self.store_id = store_id
        self._filter = ch.ChangeFilter(entities=list(entities), include_values=include_values,
                                       exclude_authors=list(exclude_authors))
        self._start: Start = start
        self.token: bytes | None = start if isinstance(start, bytes) else None
        self._on_expired = on_history_expired
        self._reconnect_for = reconnect_for
        self._call: grpc.Future | None = None  # type: ignore[type-arg]
        self._stream: Iterator[ch.SubscribeResponse] | None = None
        self._closed = False
        self.reconnects = 0

    def _open(self) -> None:
        start = self.token if self.token is not None else self._start
        if isinstance(start, bytes):
            point = ch.StartPoint(token=start)
        elif start == "oldest":
            point = ch.StartPoint(oldest=True)
        else:
            point = ch.StartPoint(now=True)
        request = ch.SubscribeRequest(store_id=self.store_id, filter=self._filter)
        getattr(request, "from").CopyFrom(point)  # `from` is a Python keyword
        call = self._stub.Subscribe(request, metadata=self._metadata)
        self._call = call
        self._stream = call

    def __iter__(self) -> "ChangeFeed":
        return self

    def __next__(self) -> FeedEvent:
        failing_since: float | None = None
        delay = 0.05
        while not self._closed:
            if self._stream is None:
                self._open()
            assert self._stream is not None
            try:
                r = next(self._stream)
            except StopIteration:
                self._stream = None  # the server ended the stream: resume
                continue
            except grpc.RpcError as e:
                self._stream = None
                if self._closed:
                    break
                err = from_rpc_error(e)
                if isinstance(err, HistoryExpired):
                    resume = self._on_expired(err) if self._on_expired else None
                    if resume is None:
                        raise err from None
                    self.token = resume
                    continue
                if err.code not in _RESUMABLE:
                    raise err from None
                resume_token = getattr(err, "resume_token", None)
                if resume_token:
                    self.token = resume_token
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > self._reconnect_for:
                    raise err from None
                self.reconnects += 1
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if r.resume_token:
                self.token = r.resume_token
            return _event(r)
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
