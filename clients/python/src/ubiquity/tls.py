"""TLS for a client: which CA to trust, and an optional client certificate (docs/tls.md in the
repository: ubiquityd's `--tls-cert`/`--tls-key`, and `--tls-client-ca` to require client
certificates). Shared by the sync and asyncio clients, which differ only in the channel type."""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Union

import grpc

# PEM bytes, or the path of a PEM file.
Pem = Union[bytes, str, PathLike[str]]

# The channel retries a lost connection quickly so a feed resumes soon after a server restart
# (grpc's defaults start at 1 s and grow to 120 s).
CHANNEL_OPTIONS: list[tuple[str, object]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


def _pem(p: Pem | None) -> bytes | None:
    if p is None or isinstance(p, bytes):
        return p
    return Path(p).read_bytes()


@dataclass(frozen=True)
class TLS:
    """`TLS(ca="ca.crt")` trusts that CA (None: the system's roots); `cert` and `key` (both or
    neither) present a client certificate. `server_name` checks the server's certificate for
    that name instead of the target's host (e.g. a certificate for "localhost" on 127.0.0.1)."""

    ca: Pem | None = None
    cert: Pem | None = None
    key: Pem | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert is None) != (self.key is None):
            raise ValueError("a client certificate needs both cert and key")
        return grpc.ssl_channel_credentials(root_certificates=_pem(self.ca), private_key=_pem(self.key),
                                            certificate_chain=_pem(self.cert))


def channel_settings(tls: TLS | None, channel_credentials: grpc.ChannelCredentials | None,
                     credentials: grpc.CallCredentials | None
                     ) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, object]]]:
    """The credentials (None: plaintext h2c) and options of a client's channel."""
    if tls is not None and channel_credentials is not None:
        raise ValueError("pass tls or channel_credentials, not both")
    options = list(CHANNEL_OPTIONS)
    if tls is not None:
        channel_credentials = tls.credentials()
        if tls.server_name:
            options.append(("grpc.ssl_target_name_override", tls.server_name))
    if credentials is not None:
        if channel_credentials is None:
            raise ValueError("call credentials need a secure channel: pass tls or channel_credentials too")
        channel_credentials = grpc.composite_channel_credentials(channel_credentials, credentials)
    return channel_credentials, options
