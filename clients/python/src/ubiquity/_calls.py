"""How the client makes a call: deadline, metadata, typed errors, and safe retries of saves.

A call is described once as a value (`Unary`, `Retried`, `Streaming`: which stub method, which
request, how to turn the answer into the client's types) by the builders in `_ops`; `Caller`
runs it on a blocking channel and `AsyncCaller` on a `grpc.aio` one. So the sync and asyncio
clients share every request, result and error rule and differ only in how they wait.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
import grpc.aio

from .errors import UbiquityError, from_rpc_error
from .session import TRANSITION_SECONDS, AsyncSession, Session

T = TypeVar("T")
R = TypeVar("R")
Metadata = Sequence[tuple[str, str]]

# A save is retried only where the first attempt may or may not have been applied, or was refused
# before applying: the client transaction ID makes the retry return the first outcome instead of
# applying twice. Everything else (conflicts, bad input) would fail the same way again.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def retry_delays(attempts: int) -> list[float]:
    """The pauses between save attempts: 50 ms, growing fourfold, at most 2 s."""
    return [min(0.05 * 4 ** i, 2.0) for i in range(max(1, attempts) - 1)]


# Stub methods: `service` names the stub ("stores", "models", "contexts", "changes", "keyvalue").
@dataclass(frozen=True)
class Unary(Generic[R]):
    """One unary call whose answer `result` converts."""

    service: str
    method: str
    request: Any
    result: Callable[[Any], R]
    # sent instead of the client's session: an acknowledgement is the session's whose stream got
    # the event, which a sign-out in flight may be ending or a renewal may have replaced
    authorization: tuple[tuple[str, str], ...] | None = None
    # the call's deadline is at least this many seconds, whatever the client's timeout
    # (TRANSITION_SECONDS for the calls that run a store transition)
    at_least: float = 0.0


@dataclass(frozen=True)
class Retried(Generic[R]):
    """A unary call safe to repeat with the same request (a save with its client transaction ID,
    a seed with its seed ID): retried while its outcome is unknown."""

    service: str
    method: str
    request: Any
    result: Callable[[Any], R]


@dataclass(frozen=True)
class Streaming(Generic[R]):
    """A server-streaming call; `result` converts each message."""

    service: str
    method: str
    request: Any
    result: Callable[[Any], R]


def authorization_of(metadata: Metadata) -> str:
    return next((v for k, v in metadata if k == "authorization"), "")


def failed(e: grpc.RpcError, session: Session | AsyncSession | None, metadata: Metadata) -> UbiquityError:
    """The typed error; a session the server no longer knows (revoked by an operator or a
    sign-out, expired, removed with its archived account) is forgotten, so the next call signs in
    anew instead of sending it again."""
    err = from_rpc_error(e)
    if session is not None and err.code == grpc.StatusCode.UNAUTHENTICATED:
        session.forget(authorization_of(metadata))
    return err


def new_transaction_id(given: str | None) -> str:
    return given or str(uuid.uuid4())


class Caller:
    """Runs calls on a blocking channel."""

    def __init__(self, stubs: dict[str, Any], timeout: float, metadata: Metadata, save_attempts: int,
                 session: Session | None = None) -> None:
        self._stubs = stubs
        self.timeout = timeout
        self._metadata = tuple(metadata)
        self.session = session
        self.save_attempts = max(1, save_attempts)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What every call sends: the caller's metadata and, when signed in, the session's."""
        return self._metadata + (self.session.metadata() if self.session else ())

    def stub(self, service: str) -> Any:
        return self._stubs[service]

    def run(self, call: Unary[R] | Retried[R]) -> R:
        method = getattr(self._stubs[call.service], call.method)
        if isinstance(call, Unary):
            return call.result(self.unary(method, call.request, timeout=max(self.timeout, call.at_least),
                                          authorization=call.authorization))
        for delay in retry_delays(self.save_attempts):
            try:
                return call.result(self.unary(method, call.request))
            except UbiquityError as e:
                if e.code not in RETRYABLE:
                    raise
            time.sleep(delay)
        return call.result(self.unary(method, call.request))

    def stream(self, call: Streaming[R]) -> Iterator[R]:
        method = getattr(self._stubs[call.service], call.method)
        metadata = self.metadata
        try:
            for message in method(call.request, timeout=self.timeout, metadata=metadata):
                yield call.result(message)
        except grpc.RpcError as e:
            raise failed(e, self.session, metadata) from None

    def unary(self, method: Callable[..., T], request: object, timeout: float | None = None,
              authorization: Metadata | None = None) -> T:
        metadata = self._metadata + tuple(authorization) if authorization is not None else self.metadata
        try:
            return method(request, timeout=timeout or self.timeout, metadata=metadata)
        except grpc.RpcError as e:
            raise failed(e, self.session, metadata) from None


class AsyncCaller:
    """Runs calls on a `grpc.aio` channel."""

    def __init__(self, stubs: dict[str, Any], timeout: float, metadata: Metadata, save_attempts: int,
                 session: AsyncSession | None = None) -> None:
        self._stubs = stubs
        self.timeout = timeout
        self._metadata = tuple(metadata)
        self.session = session
        self.save_attempts = max(1, save_attempts)

    async def metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata + (await self.session.metadata() if self.session else ())

    def stub(self, service: str) -> Any:
        return self._stubs[service]

    async def run(self, call: Unary[R] | Retried[R]) -> R:
        method = getattr(self._stubs[call.service], call.method)
        if isinstance(call, Unary):
            return call.result(await self._unary(method, call.request, call.authorization,
                                                 timeout=max(self.timeout, call.at_least)))
        for delay in retry_delays(self.save_attempts):
            try:
                return call.result(await self._unary(method, call.request))
            except UbiquityError as e:
                if e.code not in RETRYABLE:
                    raise
            await asyncio.sleep(delay)
        return call.result(await self._unary(method, call.request))

    async def stream(self, call: Streaming[R]) -> AsyncIterator[R]:
        method = getattr(self._stubs[call.service], call.method)
        metadata = await self.metadata()
        try:
            async for message in method(call.request, timeout=self.timeout, metadata=metadata):
                yield call.result(message)
        except grpc.aio.AioRpcError as e:
            raise failed(e, self.session, metadata) from None

    async def _unary(self, method: Callable[..., Any], request: object, authorization: Metadata | None = None,
                     timeout: float | None = None) -> Any:
        metadata = self._metadata + tuple(authorization) if authorization is not None else await self.metadata()
        try:
            return await method(request, timeout=timeout or self.timeout, metadata=metadata)
        except grpc.aio.AioRpcError as e:
            raise failed(e, self.session, metadata) from None
