import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KeyValueEntry(_message.Message):
    __slots__ = ("key", "value", "version", "update_time", "author", "value_size")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    VALUE_SIZE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    version: int
    update_time: _timestamp_pb2.Timestamp
    author: str
    value_size: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author: _Optional[str] = ..., value_size: _Optional[int] = ...) -> None: ...

class KeyValuePrecondition(_message.Message):
    __slots__ = ("expected_version", "must_not_exist")
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    MUST_NOT_EXIST_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    must_not_exist: bool
    def __init__(self, expected_version: _Optional[int] = ..., must_not_exist: _Optional[bool] = ...) -> None: ...

class KeyValueGetRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class KeyValueSetRequest(_message.Message):
    __slots__ = ("key", "value", "precondition", "author")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PRECONDITION_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    precondition: KeyValuePrecondition
    author: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., precondition: _Optional[_Union[KeyValuePrecondition, _Mapping]] = ..., author: _Optional[str] = ...) -> None: ...

class KeyValueDeleteRequest(_message.Message):
    __slots__ = ("key", "precondition", "author")
    KEY_FIELD_NUMBER: _ClassVar[int]
    PRECONDITION_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    key: str
    precondition: KeyValuePrecondition
    author: str
    def __init__(self, key: _Optional[str] = ..., precondition: _Optional[_Union[KeyValuePrecondition, _Mapping]] = ..., author: _Optional[str] = ...) -> None: ...

class KeyValueWriteResponse(_message.Message):
    __slots__ = ("version", "feed_token", "existed")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FEED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    version: int
    feed_token: bytes
    existed: bool
    def __init__(self, version: _Optional[int] = ..., feed_token: _Optional[bytes] = ..., existed: _Optional[bool] = ...) -> None: ...

class KeyValueListRequest(_message.Message):
    __slots__ = ("prefix", "page_size", "page_token", "keys_only")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KEYS_ONLY_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    page_size: int
    page_token: bytes
    keys_only: bool
    def __init__(self, prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[bytes] = ..., keys_only: _Optional[bool] = ...) -> None: ...

class KeyValueListResponse(_message.Message):
    __slots__ = ("entries", "next_page_token", "feed_token", "usage")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FEED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[KeyValueEntry]
    next_page_token: bytes
    feed_token: bytes
    usage: KeyValueUsage
    def __init__(self, entries: _Optional[_Iterable[_Union[KeyValueEntry, _Mapping]]] = ..., next_page_token: _Optional[bytes] = ..., feed_token: _Optional[bytes] = ..., usage: _Optional[_Union[KeyValueUsage, _Mapping]] = ...) -> None: ...

class KeyValueUsage(_message.Message):
    __slots__ = ("keys", "bytes", "max_keys", "max_bytes", "max_key_bytes", "max_value_bytes")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_KEYS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_KEY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_VALUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    keys: int
    bytes: int
    max_keys: int
    max_bytes: int
    max_key_bytes: int
    max_value_bytes: int
    def __init__(self, keys: _Optional[int] = ..., bytes: _Optional[int] = ..., max_keys: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_key_bytes: _Optional[int] = ..., max_value_bytes: _Optional[int] = ...) -> None: ...

class KeyValueConflictDetails(_message.Message):
    __slots__ = ("key", "exists", "current_version")
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    key: str
    exists: bool
    current_version: int
    def __init__(self, key: _Optional[str] = ..., exists: _Optional[bool] = ..., current_version: _Optional[int] = ...) -> None: ...

class KeyValueQuotaDetails(_message.Message):
    __slots__ = ("quota", "limit", "requested", "used")
    class Quota(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        QUOTA_UNSPECIFIED: _ClassVar[KeyValueQuotaDetails.Quota]
        QUOTA_KEYS: _ClassVar[KeyValueQuotaDetails.Quota]
        QUOTA_ACCOUNT_BYTES: _ClassVar[KeyValueQuotaDetails.Quota]
        QUOTA_KEY_BYTES: _ClassVar[KeyValueQuotaDetails.Quota]
        QUOTA_VALUE_BYTES: _ClassVar[KeyValueQuotaDetails.Quota]
    QUOTA_UNSPECIFIED: KeyValueQuotaDetails.Quota
    QUOTA_KEYS: KeyValueQuotaDetails.Quota
    QUOTA_ACCOUNT_BYTES: KeyValueQuotaDetails.Quota
    QUOTA_KEY_BYTES: KeyValueQuotaDetails.Quota
    QUOTA_VALUE_BYTES: KeyValueQuotaDetails.Quota
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    quota: KeyValueQuotaDetails.Quota
    limit: int
    requested: int
    used: int
    def __init__(self, quota: _Optional[_Union[KeyValueQuotaDetails.Quota, str]] = ..., limit: _Optional[int] = ..., requested: _Optional[int] = ..., used: _Optional[int] = ...) -> None: ...
