"""The server's operational calls (`ubiquity.v1.Admin`): liveness, facts, counters, backups.

`Ping`, `GetServerInfo` and `GetServerStats` are open to any caller; `Backup` and `RestoreStore`
are operator calls: make the client with `operator_key=` (the key ubiquityd writes to
`<data-dir>/operator.key`, docs/accounts.md), else they raise `UnauthenticatedError` /
`PermissionDeniedError`. `client.admin` on either client.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from ubiquity.v1 import admin_pb2 as ad

from ._calls import AsyncCaller, Caller, Unary


def _time(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1e6, timezone.utc)


@dataclass(frozen=True)
class Pong:
    payload: bytes          # the ping's payload, unchanged
    server_time: datetime   # when the server answered


@dataclass(frozen=True)
class TransportLimits:
    """The transport limits in force (docs/operations.md has the defaults)."""

    max_receive_message_bytes: int
    max_send_message_bytes: int
    max_concurrent_streams: int
    max_header_list_bytes: int
    max_connections: int
    max_write_queue_bytes: int


@dataclass(frozen=True)
class ServerInfo:
    name: str                 # always "ubiquityd"
    version: str
    listen_address: str       # host:port
    started_at: datetime
    limits: TransportLimits
    services: list[str]       # fully-qualified gRPC service names served
    event_loops: int

    @staticmethod
    def of(r: ad.ServerInfo) -> "ServerInfo":
        lim = r.limits
        return ServerInfo(r.name, r.version, r.listen_address, _time(r.started_at_micros), TransportLimits(
            lim.max_receive_message_bytes, lim.max_send_message_bytes, lim.max_concurrent_streams,
            lim.max_header_list_bytes, lim.max_connections, lim.max_write_queue_bytes),
            list(r.services), r.event_loops)


@dataclass(frozen=True)
class ServerStats:
    """Live counters since the process started."""

    open_connections: int
    accepted_connections: int
    refused_connections: int
    open_streams: int
    calls_by_status: dict[int, int]  # completed calls by gRPC status code (0 = OK, …)
    protocol_errors: int
    resident_bytes: int
    timed_out_connections: int

    @staticmethod
    def of(r: ad.ServerStats) -> "ServerStats":
        return ServerStats(r.open_connections, r.accepted_connections, r.refused_connections, r.open_streams,
                           dict(r.calls_by_status), r.protocol_errors, r.resident_bytes, r.timed_out_connections)


@dataclass(frozen=True)
class BackupStore:
    """One store file of a backup."""

    account: str
    store_id: str
    name: str
    generation: int    # every save acknowledged before the backup began is in the copy
    epoch: int
    file: str          # path inside the backup directory
    sha256: str
    size_bytes: int


@dataclass(frozen=True)
class BackupFile:
    """A server-wide database copied whole (catalog, key-value store): whole-server backups only."""

    file: str
    sha256: str
    size_bytes: int


@dataclass(frozen=True)
class BackupManifest:
    format_version: int
    server_version: str
    created_at: str          # ISO 8601 UTC, as in manifest.json
    stores: list[BackupStore]
    databases: list[BackupFile]
    directory: str           # the backup's directory on the server

    @staticmethod
    def of(r: ad.BackupManifest) -> "BackupManifest":
        return BackupManifest(
            r.format_version, r.server_version, r.created_at,
            [BackupStore(s.account, s.store_id, s.name, s.generation, s.epoch, s.file, s.sha256, s.size_bytes)
             for s in r.stores],
            [BackupFile(d.file, d.sha256, d.size_bytes) for d in r.databases], r.directory)


@dataclass(frozen=True)
class RestoredStore:
    store_id: str
    token: bytes       # the restored store's current token (a new epoch: older tokens are refused)
    generation: int    # the backup's generation of the store


def ping(payload: bytes) -> Unary[Pong]:
    return Unary("admin", "Ping", ad.PingRequest(payload=payload),
                 lambda r: Pong(r.payload, _time(r.server_time_micros)))


def server_info() -> Unary[ServerInfo]:
    return Unary("admin", "GetServerInfo", ad.GetServerInfoRequest(), ServerInfo.of)


def server_stats() -> Unary[ServerStats]:
    return Unary("admin", "GetServerStats", ad.GetServerStatsRequest(), ServerStats.of)


def backup(directory: str, store_id: str) -> Unary[BackupManifest]:
    return Unary("admin", "Backup", ad.BackupRequest(directory=directory, store_id=store_id), BackupManifest.of)


def restore_store(directory: str, store_id: str, replace_existing: bool) -> Unary[RestoredStore]:
    return Unary("admin", "RestoreStore", ad.RestoreStoreRequest(
        directory=directory, store_id=store_id, replace_existing=replace_existing),
        lambda r: RestoredStore(r.store_id, r.token, r.generation))


class Admin:
    """`client.admin`: the server's Admin calls, answered as typed values."""

    def __init__(self, calls: Caller) -> None:
        self._calls = calls

    def ping(self, payload: bytes = b"") -> Pong:
        return self._calls.run(ping(payload))

    def server_info(self) -> ServerInfo:
        return self._calls.run(server_info())

    def server_stats(self) -> ServerStats:
        return self._calls.run(server_stats())

    def backup(self, directory: str, *, store_id: str = "") -> BackupManifest:
        """Backs up one store (its ID) or, without one, the whole server, online, into `directory`
        on the server's file system (new or empty: else FailedPreconditionError
        BACKUP_DIRECTORY_NOT_EMPTY). Operator only."""
        return self._calls.run(backup(directory, store_id))

    def restore_store(self, directory: str, *, store_id: str = "", replace_existing: bool = False) -> RestoredStore:
        """Restores one store of a finished backup into the running server (it gets a new epoch:
        its feeds and contexts end, older tokens are refused). `replace_existing` must be True for
        a store that exists (else STORE_EXISTS). Operator only."""
        return self._calls.run(restore_store(directory, store_id, replace_existing))


class AsyncAdmin:
    """`Admin` for `ubiquity.aio.Client`: the same calls, awaited."""

    def __init__(self, calls: AsyncCaller) -> None:
        self._calls = calls

    async def ping(self, payload: bytes = b"") -> Pong:
        return await self._calls.run(ping(payload))

    async def server_info(self) -> ServerInfo:
        return await self._calls.run(server_info())

    async def server_stats(self) -> ServerStats:
        return await self._calls.run(server_stats())

    async def backup(self, directory: str, *, store_id: str = "") -> BackupManifest:
        return await self._calls.run(backup(directory, store_id))

    async def restore_store(self, directory: str, *, store_id: str = "",
                            replace_existing: bool = False) -> RestoredStore:
        return await self._calls.run(restore_store(directory, store_id, replace_existing))


__all__ = ["Admin", "AsyncAdmin", "Pong", "ServerInfo", "ServerStats", "TransportLimits", "BackupManifest",
           "BackupStore", "BackupFile", "RestoredStore"]
