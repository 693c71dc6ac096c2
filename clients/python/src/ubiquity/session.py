"""Sign-in with an API key and a session kept fresh (docs/accounts.md in the repository).

`Client(target, api_key=..., device_id=...)` signs in on its first call and again shortly before
the session expires, so long-lived clients (and change feeds that resubscribe) never send an
expired token. A device not signed in works in its local stores with a local session
(`Accounts.StartLocalSession`, renewed the same way with its device secret); signing in with
`local_device_secret` imports them into the account (docs/accounts.md "Local stores").
`SessionState` holds the rules (when to sign in, what to send) without I/O; the sync `Session` and
the asyncio `AsyncSession` only make the `Accounts` calls.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import grpc
import grpc.aio

from .errors import from_rpc_error
from .events import ImportCounts
from .v1 import accounts_pb2, accounts_pb2_grpc

# Sign in again this long before the expiry the server gave, so a call sent just before it
# (or one in flight across it) does not fail.
REFRESH_MARGIN_SECONDS = 60.0


@dataclass(frozen=True)
class SignedIn:
    """The session a client holds (`client.sign_in()`)."""

    account_id: str                     # the account it acts for; "" for a local session
    expires_at: datetime                # renewed before then by the client itself
    local: bool                         # a local session (StartLocalSession): the device's own stores
    device_secret: str                  # a local session's device secret: keep it for later sessions
    local_import: ImportCounts | None   # SignIn with local_device_secret: what the import did


class SessionState:
    """A session: the token, when it ends, and whether it is due for renewal.

    `SessionState(api_key, device_id, local_device_secret)` signs in with an API key (importing
    the device's local stores on the first sign-in when the secret is given);
    `SessionState.local(device_id, device_secret)` starts local sessions (the first one, without
    a secret, registers the device and learns its secret, which later renewals send).
    """

    def __init__(self, api_key: str, device_id: str, local_device_secret: str | None = None) -> None:
        if not api_key or not device_id:
            raise ValueError("api_key and device_id are both required to sign in")
        self._begin("SignIn", accounts_pb2.SignInRequest(api_key=api_key, device_id=device_id,
                                                         local_device_secret=local_device_secret or ""), "")

    @classmethod
    def local(cls, device_id: str, device_secret: str | None = None) -> "SessionState":
        if not device_id:
            raise ValueError("a local session needs the device's ID")
        state = cls.__new__(cls)  # not __init__: that one is the API key's
        state._begin("StartLocalSession", accounts_pb2.StartLocalSessionRequest(
            device_id=device_id, device_secret=device_secret or ""), device_secret or "")
        return state

    def _begin(self, method: str, request: Any, device_secret: str) -> None:
        self.method = method  # the Accounts call that starts (and renews) the session
        self.request = request
        self.token = ""
        self.expires_at = 0.0
        self.account_id = ""
        self.device_secret = device_secret
        self.local_import: ImportCounts | None = None

    @property
    def is_local(self) -> bool:
        return self.method == "StartLocalSession"

    def due(self, now: float) -> bool:
        return now >= self.expires_at - REFRESH_MARGIN_SECONDS

    def signed_in(self, r: Any) -> None:
        """Takes a SignInResponse or a StartLocalSessionResponse."""
        self.token = r.session_token
        self.expires_at = r.expires_at_micros / 1e6
        if self.is_local:
            if r.device_secret:  # the registering call's answer, shown once: renewals send it
                self.device_secret = self.request.device_secret = r.device_secret
            return
        self.account_id = r.account_id
        if r.HasField("local_import"):
            self.local_import = ImportCounts.of(r.local_import)
        # imported once; a renewal must not import local work made after this sign-in
        self.request.local_device_secret = ""

    def info(self) -> SignedIn:
        return SignedIn(self.account_id, datetime.fromtimestamp(self.expires_at, timezone.utc), self.is_local,
                        self.device_secret, self.local_import)

    def forget(self, authorization: str) -> None:
        """The server ended the session sent as `authorization`: the next call starts a new one
        (unless it was already replaced)."""
        if authorization and authorization == self.metadata()[0][1]:
            self.token, self.expires_at = "", 0.0

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

    def __init__(self, channel: grpc.Channel, state: SessionState, timeout: float = 30.0) -> None:
        self.state = state
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
                    call = getattr(self._stub, self.state.method)
                    self.state.signed_in(call(self.state.request, timeout=self._timeout))
                except grpc.RpcError as e:
                    raise from_rpc_error(e) from None
            return self.state.metadata()

    def sign_in(self) -> SignedIn:
        """Signs in (or starts the local session) now unless the session is fresh."""
        self.metadata()
        return self.state.info()

    def forget(self, authorization: str) -> None:
        with self._lock:
            self.state.forget(authorization)

    def sign_out(self) -> None:
        """Ends the session (if signed in); the next call signs in again."""
        with self._lock:
            token = self.state.take()
        if token:
            self._stub.SignOut(accounts_pb2.SignOutRequest(), metadata=_bearer(token), timeout=self._timeout)


class AsyncSession:
    """The session of an asyncio client, signing in over the client's own `grpc.aio` channel."""

    def __init__(self, channel: grpc.aio.Channel, state: SessionState, timeout: float = 30.0) -> None:
        self.state = state
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
                    call = getattr(self._stub, self.state.method)
                    self.state.signed_in(await call(self.state.request, timeout=self._timeout))
                except grpc.aio.AioRpcError as e:
                    raise from_rpc_error(e) from None
            return self.state.metadata()

    async def sign_in(self) -> SignedIn:
        await self.metadata()
        return self.state.info()

    def forget(self, authorization: str) -> None:
        self.state.forget(authorization)

    async def sign_out(self) -> None:
        token = self.state.take()
        if token:
            await self._stub.SignOut(accounts_pb2.SignOutRequest(), metadata=_bearer(token), timeout=self._timeout)
