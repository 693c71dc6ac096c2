"""How the client makes a call: deadline, metadata, typed errors, and safe retries of saves."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

import grpc

from .session import Session

from .errors import UbiquityError, from_rpc_error

T = TypeVar("T")
Metadata = Sequence[tuple[str, str]]

# A save is retried only where the first attempt may or may not have been applied, or was refused
# before applying: the client transaction ID makes the retry return the first outcome instead of
# applying twice. Everything else (conflicts, bad input) would fail the same way again.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def retry_delays(attempts: int) -> list[float]:
    """The pauses between save attempts: 50 ms, growing fourfold, at most 2 s."""
    return [min(0.05 * 4 ** i, 2.0) for i in range(max(1, attempts) - 1)]


class Caller:
    def __init__(self, timeout: float, metadata: Metadata, save_attempts: int,
                 session: Session | None = None) -> None:
        self.timeout = timeout
        self._metadata = tuple(metadata)
        self.session = session
        self.save_attempts = max(1, save_attempts)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What every call sends: the caller's metadata and, when signed in, the session's."""
        return self._metadata + (self.session.metadata() if self.session else ())

    def unary(self, method: Callable[..., T], request: object, timeout: float | None = None) -> T:
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self.metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def save(self, method: Callable[..., T], make_request: Callable[[str], object],
             client_transaction_id: str | None) -> tuple[T, str]:
        """Calls a save, retrying with the same client transaction ID. Returns (response, ID)."""
        txid = client_transaction_id or str(uuid.uuid4())
        request = make_request(txid)
        for delay in retry_delays(self.save_attempts):
            try:
                return self.unary(method, request), txid
            except UbiquityError as e:
                if e.code not in RETRYABLE:
                    raise
            time.sleep(delay)
        return self.unary(method, request), txid
