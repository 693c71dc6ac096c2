"""Sign-in with an API key and a session kept fresh (docs/accounts.md in the repository).

`Client(target, api_key=..., device_id=...)` signs in on its first call and again shortly before
the session expires, so long-lived clients (and change feeds that resubscribe) never send an
expired token. `SessionState` holds the rules (when to sign in, what to send) without I/O; the
sync `Session` and the asyncio `AsyncSession` only make the `Accounts.SignIn` / `SignOut` calls.
"""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import grpc.aio

from .errors import from_rpc_error
from .v1 import accounts_pb2, accounts_pb2_grpc

# Sign in again this long before the expiry the server gave, so a call sent just before it
# (or one in flight across it) does not fail.
REFRESH_MARGIN_SECONDS = 60.0


class SessionState:
    """An API key's session: the token, when it ends, and whether it is due for renewal."""

    def __init__(self, api_key: str, device_id: str) -> None:
        if not api_key or not device_id:
            raise ValueError("api_key and device_id are both required to sign in")
        self.request = accounts_pb2.SignInRequest(api_key=api_key, device_id=device_id)
        self.token = ""
        self.expires_at = 0.0
        self.account_id = ""

    def due(self, now: float) -> bool:
        return now >= self.expires_at - REFRESH_MARGIN_SECONDS

    def signed_in(self, r: accounts_pb2.SignInResponse) -> None:
        self.token = r.session_token
        self.expires_at = r.expires_at_micros / 1e6
        self.account_id = r.account_id

    def take(self) -> str:
        """Forgets the session (the next call signs in again); returns its token ("" if none)."""
        token, self.token, self.expires_at = self.token, "", 0.0
        return token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


class Session:
    """The session of a sync client: `metadata()` is the `authorization` to send (thread-safe)."""

    def __init__(self, channel: grpc.Channel, api_key: str, device_id: str, timeout: float = 30.0) -> None:
        self.state = SessionState(api_key, device_id)
        self._stub = accounts_pb2_grpc.AccountsStub(channel)
        self._timeout = timeout
        self._lock = threading.Lock()

    @property
    def account_id(self) -> str:
        return self.state.account_id

    def metadata(self) -> tuple[tuple[str, str], ...]:
        with self._lock:
            if self.state.due(time.time()):
                try:
                    self.state.signed_in(self._stub.SignIn(self.state.request, timeout=self._timeout))
                except grpc.RpcError as e:
                    raise from_rpc_error(e) from None
            return self.state.metadata()

    def sign_out(self) -> None:
        """Ends the session (if signed in); the next call signs in again."""
        with self._lock:
            token = self.state.take()
        if token:
            self._stub.SignOut(accounts_pb2.SignOutRequest(), metadata=_bearer(token), timeout=self._timeout)


class AsyncSession:
    """The session of an asyncio client, signing in over the client's own `grpc.aio` channel."""

    def __init__(self, channel: grpc.aio.Channel, api_key: str, device_id: str, timeout: float = 30.0) -> None:
        self.state = SessionState(api_key, device_id)
        self._stub = accounts_pb2_grpc.AccountsStub(channel)
        self._timeout = timeout
        # Created on first use: a lock binds to the running loop.
        self._lock: asyncio.Lock | None = None

    @property
    def account_id(self) -> str:
        return self.state.account_id

    async def metadata(self) -> tuple[tuple[str, str], ...]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # concurrent first calls share one sign-in
            if self.state.due(time.time()):
                try:
                    self.state.signed_in(await self._stub.SignIn(self.state.request, timeout=self._timeout))
                except grpc.aio.AioRpcError as e:
                    raise from_rpc_error(e) from None
            return self.state.metadata()

    async def sign_out(self) -> None:
        token = self.state.take()
        if token:
            await self._stub.SignOut(accounts_pb2.SignOutRequest(), metadata=_bearer(token), timeout=self._timeout)
