from ubiquity.v1 import changes_pb2 as _changes_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AccountState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCOUNT_STATE_UNSPECIFIED: _ClassVar[AccountState]
    ACCOUNT_STATE_ACTIVE: _ClassVar[AccountState]
    ACCOUNT_STATE_ARCHIVED: _ClassVar[AccountState]
    ACCOUNT_STATE_DELETING: _ClassVar[AccountState]
    ACCOUNT_STATE_ARCHIVING: _ClassVar[AccountState]
    ACCOUNT_STATE_RESTORING: _ClassVar[AccountState]

class ApiKeyScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    API_KEY_SCOPE_UNSPECIFIED: _ClassVar[ApiKeyScope]
    API_KEY_SCOPE_READ_WRITE: _ClassVar[ApiKeyScope]
    API_KEY_SCOPE_READ_ONLY: _ClassVar[ApiKeyScope]
    API_KEY_SCOPE_ONE_STORE: _ClassVar[ApiKeyScope]
ACCOUNT_STATE_UNSPECIFIED: AccountState
ACCOUNT_STATE_ACTIVE: AccountState
ACCOUNT_STATE_ARCHIVED: AccountState
ACCOUNT_STATE_DELETING: AccountState
ACCOUNT_STATE_ARCHIVING: AccountState
ACCOUNT_STATE_RESTORING: AccountState
API_KEY_SCOPE_UNSPECIFIED: ApiKeyScope
API_KEY_SCOPE_READ_WRITE: ApiKeyScope
API_KEY_SCOPE_READ_ONLY: ApiKeyScope
API_KEY_SCOPE_ONE_STORE: ApiKeyScope

class Account(_message.Message):
    __slots__ = ("account_id", "display_name", "state", "created_at_micros")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    display_name: str
    state: AccountState
    created_at_micros: int
    def __init__(self, account_id: _Optional[str] = ..., display_name: _Optional[str] = ..., state: _Optional[_Union[AccountState, str]] = ..., created_at_micros: _Optional[int] = ...) -> None: ...

class CreateAccountRequest(_message.Message):
    __slots__ = ("display_name",)
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    display_name: str
    def __init__(self, display_name: _Optional[str] = ...) -> None: ...

class GetAccountRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class ListAccountsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAccountsResponse(_message.Message):
    __slots__ = ("accounts", "next_page_token")
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    accounts: _containers.RepeatedCompositeFieldContainer[Account]
    next_page_token: str
    def __init__(self, accounts: _Optional[_Iterable[_Union[Account, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("account_id", "scope", "store_name", "label")
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STORE_NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    scope: ApiKeyScope
    store_name: str
    label: str
    def __init__(self, account_id: _Optional[str] = ..., scope: _Optional[_Union[ApiKeyScope, str]] = ..., store_name: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class ApiKey(_message.Message):
    __slots__ = ("key_id", "account_id", "scope", "store_name", "label", "created_at_micros", "revoked")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STORE_NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    account_id: str
    scope: ApiKeyScope
    store_name: str
    label: str
    created_at_micros: int
    revoked: bool
    def __init__(self, key_id: _Optional[str] = ..., account_id: _Optional[str] = ..., scope: _Optional[_Union[ApiKeyScope, str]] = ..., store_name: _Optional[str] = ..., label: _Optional[str] = ..., created_at_micros: _Optional[int] = ..., revoked: _Optional[bool] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("key", "secret")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    secret: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("sessions_revoked",)
    SESSIONS_REVOKED_FIELD_NUMBER: _ClassVar[int]
    sessions_revoked: int
    def __init__(self, sessions_revoked: _Optional[int] = ...) -> None: ...

class SignInRequest(_message.Message):
    __slots__ = ("api_key", "device_id", "local_device_secret")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_DEVICE_SECRET_FIELD_NUMBER: _ClassVar[int]
    api_key: str
    device_id: str
    local_device_secret: str
    def __init__(self, api_key: _Optional[str] = ..., device_id: _Optional[str] = ..., local_device_secret: _Optional[str] = ...) -> None: ...

class SignInResponse(_message.Message):
    __slots__ = ("session_token", "expires_at_micros", "account_id", "scope", "local_import")
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_IMPORT_FIELD_NUMBER: _ClassVar[int]
    session_token: str
    expires_at_micros: int
    account_id: str
    scope: ApiKeyScope
    local_import: _changes_pb2.ImportCounts
    def __init__(self, session_token: _Optional[str] = ..., expires_at_micros: _Optional[int] = ..., account_id: _Optional[str] = ..., scope: _Optional[_Union[ApiKeyScope, str]] = ..., local_import: _Optional[_Union[_changes_pb2.ImportCounts, _Mapping]] = ...) -> None: ...

class SignOutRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SignOutResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StartLocalSessionRequest(_message.Message):
    __slots__ = ("device_id", "device_secret")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_SECRET_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    device_secret: str
    def __init__(self, device_id: _Optional[str] = ..., device_secret: _Optional[str] = ...) -> None: ...

class StartLocalSessionResponse(_message.Message):
    __slots__ = ("session_token", "expires_at_micros", "device_secret")
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_SECRET_FIELD_NUMBER: _ClassVar[int]
    session_token: str
    expires_at_micros: int
    device_secret: str
    def __init__(self, session_token: _Optional[str] = ..., expires_at_micros: _Optional[int] = ..., device_secret: _Optional[str] = ...) -> None: ...

class ArchiveAccountRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class RestoreAccountRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class DeleteAccountRequest(_message.Message):
    __slots__ = ("account_id",)
    ACCOUNT_ID_FIELD_NUMBER: _ClassVar[int]
    account_id: str
    def __init__(self, account_id: _Optional[str] = ...) -> None: ...

class DeleteAccountResponse(_message.Message):
    __slots__ = ("stores_removed", "archived_stores_removed", "key_value_entries_removed", "api_keys_removed", "sessions_removed", "bytes_removed")
    STORES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_STORES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUE_ENTRIES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    API_KEYS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    BYTES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    stores_removed: int
    archived_stores_removed: int
    key_value_entries_removed: int
    api_keys_removed: int
    sessions_removed: int
    bytes_removed: int
    def __init__(self, stores_removed: _Optional[int] = ..., archived_stores_removed: _Optional[int] = ..., key_value_entries_removed: _Optional[int] = ..., api_keys_removed: _Optional[int] = ..., sessions_removed: _Optional[int] = ..., bytes_removed: _Optional[int] = ...) -> None: ...
