from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PingRequest(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ("payload", "server_time_micros")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    server_time_micros: int
    def __init__(self, payload: _Optional[bytes] = ..., server_time_micros: _Optional[int] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerInfo(_message.Message):
    __slots__ = ("name", "version", "listen_address", "started_at_micros", "limits", "services", "event_loops")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LISTEN_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    EVENT_LOOPS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    listen_address: str
    started_at_micros: int
    limits: TransportLimits
    services: _containers.RepeatedScalarFieldContainer[str]
    event_loops: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., listen_address: _Optional[str] = ..., started_at_micros: _Optional[int] = ..., limits: _Optional[_Union[TransportLimits, _Mapping]] = ..., services: _Optional[_Iterable[str]] = ..., event_loops: _Optional[int] = ...) -> None: ...

class TransportLimits(_message.Message):
    __slots__ = ("max_receive_message_bytes", "max_send_message_bytes", "max_concurrent_streams", "max_header_list_bytes", "max_connections", "max_write_queue_bytes")
    MAX_RECEIVE_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_SEND_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_STREAMS_FIELD_NUMBER: _ClassVar[int]
    MAX_HEADER_LIST_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_WRITE_QUEUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_receive_message_bytes: int
    max_send_message_bytes: int
    max_concurrent_streams: int
    max_header_list_bytes: int
    max_connections: int
    max_write_queue_bytes: int
    def __init__(self, max_receive_message_bytes: _Optional[int] = ..., max_send_message_bytes: _Optional[int] = ..., max_concurrent_streams: _Optional[int] = ..., max_header_list_bytes: _Optional[int] = ..., max_connections: _Optional[int] = ..., max_write_queue_bytes: _Optional[int] = ...) -> None: ...

class GetServerStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerStats(_message.Message):
    __slots__ = ("open_connections", "accepted_connections", "refused_connections", "open_streams", "calls_by_status", "protocol_errors", "resident_bytes", "timed_out_connections")
    class CallsByStatusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    OPEN_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    OPEN_STREAMS_FIELD_NUMBER: _ClassVar[int]
    CALLS_BY_STATUS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_ERRORS_FIELD_NUMBER: _ClassVar[int]
    RESIDENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    open_connections: int
    accepted_connections: int
    refused_connections: int
    open_streams: int
    calls_by_status: _containers.ScalarMap[int, int]
    protocol_errors: int
    resident_bytes: int
    timed_out_connections: int
    def __init__(self, open_connections: _Optional[int] = ..., accepted_connections: _Optional[int] = ..., refused_connections: _Optional[int] = ..., open_streams: _Optional[int] = ..., calls_by_status: _Optional[_Mapping[int, int]] = ..., protocol_errors: _Optional[int] = ..., resident_bytes: _Optional[int] = ..., timed_out_connections: _Optional[int] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ("directory", "store_id")
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    directory: str
    store_id: str
    def __init__(self, directory: _Optional[str] = ..., store_id: _Optional[str] = ...) -> None: ...

class BackupManifest(_message.Message):
    __slots__ = ("format_version", "server_version", "created_at", "stores", "databases", "directory")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    DATABASES_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    server_version: str
    created_at: str
    stores: _containers.RepeatedCompositeFieldContainer[BackupStoreEntry]
    databases: _containers.RepeatedCompositeFieldContainer[BackupFileEntry]
    directory: str
    def __init__(self, format_version: _Optional[int] = ..., server_version: _Optional[str] = ..., created_at: _Optional[str] = ..., stores: _Optional[_Iterable[_Union[BackupStoreEntry, _Mapping]]] = ..., databases: _Optional[_Iterable[_Union[BackupFileEntry, _Mapping]]] = ..., directory: _Optional[str] = ...) -> None: ...

class BackupStoreEntry(_message.Message):
    __slots__ = ("account", "store_id", "name", "generation", "epoch", "file", "sha256", "size_bytes")
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    account: str
    store_id: str
    name: str
    generation: int
    epoch: int
    file: str
    sha256: str
    size_bytes: int
    def __init__(self, account: _Optional[str] = ..., store_id: _Optional[str] = ..., name: _Optional[str] = ..., generation: _Optional[int] = ..., epoch: _Optional[int] = ..., file: _Optional[str] = ..., sha256: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class BackupFileEntry(_message.Message):
    __slots__ = ("file", "sha256", "size_bytes")
    FILE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    file: str
    sha256: str
    size_bytes: int
    def __init__(self, file: _Optional[str] = ..., sha256: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class RestoreStoreRequest(_message.Message):
    __slots__ = ("directory", "store_id", "replace_existing")
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    REPLACE_EXISTING_FIELD_NUMBER: _ClassVar[int]
    directory: str
    store_id: str
    replace_existing: bool
    def __init__(self, directory: _Optional[str] = ..., store_id: _Optional[str] = ..., replace_existing: _Optional[bool] = ...) -> None: ...

class RestoreStoreResponse(_message.Message):
    __slots__ = ("store_id", "token", "generation")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    token: bytes
    generation: int
    def __init__(self, store_id: _Optional[str] = ..., token: _Optional[bytes] = ..., generation: _Optional[int] = ...) -> None: ...
