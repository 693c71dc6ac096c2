"""Sign-in with an API key and a session kept fresh (docs/accounts.md in the repository).

`Client(target, api_key=..., device_id=...)` signs in on its first call and again shortly before
the session expires, so long-lived clients (and change feeds that resubscribe) never send an
expired token. Signing in is a plain unary call on the client's own channel.
"""

from __future__ import annotations

import threading
import time

import grpc

from .v1 import accounts_pb2, accounts_pb2_grpc

# Sign in again this long before the expiry the server gave, so a call sent just before it
# (or one in flight across it) does not fail.
REFRESH_MARGIN_SECONDS = 60.0


class Session:
    """An API key's session on one channel: `metadata()` is the `authorization` to send."""

    def __init__(self, channel: grpc.Channel, api_key: str, device_id: str, timeout: float = 30.0) -> None:
        if not api_key or not device_id:
            raise ValueError("api_key and device_id are both required to sign in")
        self._stub = accounts_pb2_grpc.AccountsStub(channel)
        self._api_key = api_key
        self._device_id = device_id
        self._timeout = timeout
        self._lock = threading.Lock()
        self._token = ""
        self._expires_at = 0.0
        self.account_id = ""

    def metadata(self) -> tuple[tuple[str, str], ...]:
        with self._lock:
            if time.time() >= self._expires_at - REFRESH_MARGIN_SECONDS:
                self._sign_in()
            return (("authorization", f"Bearer {self._token}"),)

    def _sign_in(self) -> None:
        from .errors import from_rpc_error

        try:
            r = self._stub.SignIn(accounts_pb2.SignInRequest(api_key=self._api_key, device_id=self._device_id),
                                  timeout=self._timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        self._token = r.session_token
        self._expires_at = r.expires_at_micros / 1e6
        self.account_id = r.account_id

    def sign_out(self) -> None:
        """Ends the session (if signed in); the next call signs in again."""
        with self._lock:
            if not self._token:
                return
            token, self._token, self._expires_at = self._token, "", 0.0
        self._stub.SignOut(accounts_pb2.SignOutRequest(), metadata=(("authorization", f"Bearer {token}"),),
                           timeout=self._timeout)
