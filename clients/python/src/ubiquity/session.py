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
import enum
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

# A call that runs a store transition (SignOut, ArchiveAccount, DeleteAccount) answers only after
# the server's acknowledgement and save windows (`--transition-ack-seconds` +
# `--transition-save-seconds`, 40 s at the defaults; docs/lifecycle.md): its deadline is at least
# this, so a client's 30 s timeout does not give up on a sign-out the server then finishes.
TRANSITION_SECONDS = 120.0

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


class Step(enum.Enum):
    """What a caller that needs the session's token does next (`SessionState.next_step`)."""

    SEND = "send"        # send `SessionState.sendable` (a fresh session, or one being signed out)
    SIGN_IN = "sign_in"  # make the sign-in call (recorded as in flight), then send what it made
    WAIT = "wait"        # another caller is signing in or out: wait for it to finish, then ask again


class SessionState:
    """A session: the token, when it ends, and who is signing in or out right now.

    `SessionState(api_key, device_id, local_device_secret)` signs in with an API key (importing
    the device's local stores on the first sign-in when the secret is given);
    `SessionState.local(device_id, device_secret)` starts local sessions (the first one, without
    a secret, registers the device and learns its secret, which later renewals send).

    The clients hold their lock only to read and change this state, never across a call to the
    server: a sign-out waits on the server for the device's acknowledgements and contexts' saves,
    which are calls of the same client. The rules (`next_step`, `begin_sign_out`):

    - one sign-in at a time; while it runs, callers with a still valid token send it (a refresh
      before expiry blocks nobody) and callers without one wait for it;
    - a sign-out waits for a sign-in in flight (it ends the session that sign-in makes, so no
      session outlives a `sign_out()`), then ends the token it takes; while the server works on
      it, calls send that token (the acknowledgements and contexts' saves the sign-out waits for
      are that session's; it is not refreshed meanwhile), unless a stream learned it was revoked,
      after which calls wait for the sign-out to return;
    - an explicit `sign_in()` during a sign-out waits for it, then signs in anew;
    - after a sign-out returns, the next call signs in anew.
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
        self.signing_in = False  # a sign-in call is in flight
        self.ending = ""  # the token a sign-out in flight is ending ("" if none)
        self.ending_revoked = False  # a stream learned the ending session is revoked already

    @property
    def is_local(self) -> bool:
        return self.method == "StartLocalSession"

    def due(self, now: float) -> bool:
        return now >= self.expires_at - REFRESH_MARGIN_SECONDS

    def next_step(self, now: float, explicit_sign_in: bool = False) -> Step:
        """What a caller needing the token does; `explicit_sign_in` for `sign_in()`, which wants a
        session that outlives any sign-out in flight. SIGN_IN records that the caller signs in."""
        if self.ending:
            return Step.WAIT if explicit_sign_in or self.ending_revoked else Step.SEND
        valid = bool(self.token) and now < self.expires_at
        if not self.due(now):
            return Step.SEND
        if self.signing_in:
            return Step.SEND if valid else Step.WAIT
        self.signing_in = True
        return Step.SIGN_IN

    def sendable(self) -> tuple[tuple[str, str], ...]:
        """The `authorization` to send after `next_step` answered SEND."""
        return _bearer(self.ending or self.token)

    def signed_in(self, r: Any) -> None:
        """Takes a SignInResponse or a StartLocalSessionResponse."""
        self.signing_in = False
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

    def sign_in_failed(self) -> None:
        self.signing_in = False

    def info(self) -> SignedIn:
        return SignedIn(self.account_id, datetime.fromtimestamp(self.expires_at, timezone.utc), self.is_local,
                        self.device_secret, self.local_import)

    def forget(self, authorization: str) -> None:
        """The server ended the session sent as `authorization`: the next call starts a new one
        (unless it was already replaced; the one being signed out is waited for instead)."""
        if not authorization:
            return
        if self.ending and authorization == _bearer(self.ending)[0][1]:
            self.ending_revoked = True
        elif self.token and authorization == _bearer(self.token)[0][1]:
            self.token, self.expires_at = "", 0.0

    def begin_sign_out(self) -> str | None:
        """The token the SignOut call ends ("" if none: nothing to call, but `signed_out()`), the
        session sent meanwhile; None while a sign-in or another sign-out is in flight: wait."""
        if self.signing_in or self.ending:
            return None
        self.ending, self.ending_revoked = self.token, False
        self.token, self.expires_at = "", 0.0
        return self.ending

    def signed_out(self) -> None:
        """The SignOut call returned (or failed: the token is dropped either way)."""
        self.ending, self.ending_revoked = "", False


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


class Session:
    """The session of a sync client: `metadata()` is the `authorization` to send (thread-safe).

    The lock guards `state` only; sign-in and sign-out calls run outside it (`SessionState`)."""

    def __init__(self, channel: grpc.Channel, state: SessionState, timeout: float = 30.0) -> None:
        self.state = state
        self._stub = accounts_pb2_grpc.AccountsStub(channel)
        self._timeout = timeout
        self._changed = threading.Condition()

    @property
    def account_id(self) -> str:
        return self.state.account_id

    def metadata(self, explicit_sign_in: bool = False) -> tuple[tuple[str, str], ...]:
        with self._changed:
            step = self.state.next_step(time.time(), explicit_sign_in)
            while step is Step.WAIT:
                self._changed.wait()
                step = self.state.next_step(time.time(), explicit_sign_in)
            if step is Step.SEND:
                return self.state.sendable()
        self._sign_in()
        with self._changed:
            # what it made, even if already due again (a lifetime shorter than the margin)
            return self.state.sendable()

    def _sign_in(self) -> None:
        try:
            response = getattr(self._stub, self.state.method)(self.state.request, timeout=self._timeout)
        except BaseException as e:
            with self._changed:
                self.state.sign_in_failed()
                self._changed.notify_all()
            if isinstance(e, grpc.RpcError):
                raise from_rpc_error(e) from None
            raise
        with self._changed:
            self.state.signed_in(response)
            self._changed.notify_all()

    def sign_in(self) -> SignedIn:
        """Signs in (or starts the local session) now unless the session is fresh; after a
        sign-out in flight returns."""
        self.metadata(explicit_sign_in=True)
        return self.state.info()

    def forget(self, authorization: str) -> None:
        with self._changed:  # no waiter's step depends on it: nobody to wake
            self.state.forget(authorization)

    def sign_out(self) -> None:
        """Ends the session (if signed in); the next call signs in again. Calls made meanwhile
        (the acknowledgements and contexts' saves the server waits for) send the ending session."""
        with self._changed:
            token = self.state.begin_sign_out()
            while token is None:
                self._changed.wait()
                token = self.state.begin_sign_out()
        try:
            if token:
                self._stub.SignOut(accounts_pb2.SignOutRequest(), metadata=_bearer(token),
                                   timeout=max(self._timeout, TRANSITION_SECONDS))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            with self._changed:
                self.state.signed_out()
                self._changed.notify_all()


class AsyncSession:
    """The session of an asyncio client, signing in over the client's own `grpc.aio` channel;
    the same rules as `Session`, with an `asyncio.Condition`."""

    def __init__(self, channel: grpc.aio.Channel, state: SessionState, timeout: float = 30.0) -> None:
        self.state = state
        self._stub = accounts_pb2_grpc.AccountsStub(channel)
        self._timeout = timeout
        # Created on first use: a condition binds to the running loop.
        self._condition: asyncio.Condition | None = None

    @property
    def account_id(self) -> str:
        return self.state.account_id

    @property
    def _changed(self) -> asyncio.Condition:
        if self._condition is None:
            self._condition = asyncio.Condition()
        return self._condition

    async def metadata(self, explicit_sign_in: bool = False) -> tuple[tuple[str, str], ...]:
        async with self._changed:
            step = self.state.next_step(time.time(), explicit_sign_in)
            while step is Step.WAIT:
                await self._changed.wait()
                step = self.state.next_step(time.time(), explicit_sign_in)
            if step is Step.SEND:
                return self.state.sendable()
        await self._sign_in()
        return self.state.sendable()  # as Session.metadata

    async def _sign_in(self) -> None:
        try:
            response = await getattr(self._stub, self.state.method)(self.state.request, timeout=self._timeout)
        except BaseException as e:
            async with self._changed:
                self.state.sign_in_failed()
                self._changed.notify_all()
            if isinstance(e, grpc.aio.AioRpcError):
                raise from_rpc_error(e) from None
            raise
        async with self._changed:
            self.state.signed_in(response)
            self._changed.notify_all()

    async def sign_in(self) -> SignedIn:
        await self.metadata(explicit_sign_in=True)
        return self.state.info()

    def forget(self, authorization: str) -> None:
        # no await in it, so nothing else on the loop sees it half done; no waiter to wake
        self.state.forget(authorization)

    async def sign_out(self) -> None:
        async with self._changed:
            token = self.state.begin_sign_out()
            while token is None:
                await self._changed.wait()
                token = self.state.begin_sign_out()
        try:
            if token:
                await self._stub.SignOut(accounts_pb2.SignOutRequest(), metadata=_bearer(token),
                                         timeout=max(self._timeout, TRANSITION_SECONDS))
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        finally:
            async with self._changed:
                self.state.signed_out()
                self._changed.notify_all()
