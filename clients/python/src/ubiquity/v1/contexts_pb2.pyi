from ubiquity.v1 import objects_pb2 as _objects_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerationMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GENERATION_MODE_UNSPECIFIED: _ClassVar[GenerationMode]
    GENERATION_MODE_UNPINNED: _ClassVar[GenerationMode]
    GENERATION_MODE_PINNED_AT_FIRST_READ: _ClassVar[GenerationMode]
    GENERATION_MODE_PINNED_AT_TOKEN: _ClassVar[GenerationMode]
GENERATION_MODE_UNSPECIFIED: GenerationMode
GENERATION_MODE_UNPINNED: GenerationMode
GENERATION_MODE_PINNED_AT_FIRST_READ: GenerationMode
GENERATION_MODE_PINNED_AT_TOKEN: GenerationMode

class CreateContextRequest(_message.Message):
    __slots__ = ("store_id", "name", "author", "merge_policy", "generation_mode", "token", "parent_context_id", "automatically_merges_changes")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    MERGE_POLICY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_MODE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    AUTOMATICALLY_MERGES_CHANGES_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    name: str
    author: str
    merge_policy: _objects_pb2.MergePolicy
    generation_mode: GenerationMode
    token: bytes
    parent_context_id: str
    automatically_merges_changes: bool
    def __init__(self, store_id: _Optional[str] = ..., name: _Optional[str] = ..., author: _Optional[str] = ..., merge_policy: _Optional[_Union[_objects_pb2.MergePolicy, str]] = ..., generation_mode: _Optional[_Union[GenerationMode, str]] = ..., token: _Optional[bytes] = ..., parent_context_id: _Optional[str] = ..., automatically_merges_changes: _Optional[bool] = ...) -> None: ...

class ContextState(_message.Message):
    __slots__ = ("context_id", "store_id", "has_changes", "inserted_count", "updated_count", "deleted_count", "token", "generation_mode", "merge_policy", "parent_context_id", "name")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_CHANGES_FIELD_NUMBER: _ClassVar[int]
    INSERTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_COUNT_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_MODE_FIELD_NUMBER: _ClassVar[int]
    MERGE_POLICY_FIELD_NUMBER: _ClassVar[int]
    PARENT_CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    store_id: str
    has_changes: bool
    inserted_count: int
    updated_count: int
    deleted_count: int
    token: bytes
    generation_mode: GenerationMode
    merge_policy: _objects_pb2.MergePolicy
    parent_context_id: str
    name: str
    def __init__(self, context_id: _Optional[str] = ..., store_id: _Optional[str] = ..., has_changes: _Optional[bool] = ..., inserted_count: _Optional[int] = ..., updated_count: _Optional[int] = ..., deleted_count: _Optional[int] = ..., token: _Optional[bytes] = ..., generation_mode: _Optional[_Union[GenerationMode, str]] = ..., merge_policy: _Optional[_Union[_objects_pb2.MergePolicy, str]] = ..., parent_context_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ContextRequest(_message.Message):
    __slots__ = ("context_id",)
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    def __init__(self, context_id: _Optional[str] = ...) -> None: ...

class ContextFetchRequest(_message.Message):
    __slots__ = ("context_id", "fetch", "excludes_pending_changes")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    EXCLUDES_PENDING_CHANGES_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    fetch: _objects_pb2.FetchSpec
    excludes_pending_changes: bool
    def __init__(self, context_id: _Optional[str] = ..., fetch: _Optional[_Union[_objects_pb2.FetchSpec, _Mapping]] = ..., excludes_pending_changes: _Optional[bool] = ...) -> None: ...

class ContextInsertRequest(_message.Message):
    __slots__ = ("context_id", "inserts")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    INSERTS_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    inserts: _containers.RepeatedCompositeFieldContainer[_objects_pb2.Insert]
    def __init__(self, context_id: _Optional[str] = ..., inserts: _Optional[_Iterable[_Union[_objects_pb2.Insert, _Mapping]]] = ...) -> None: ...

class ContextInsertResponse(_message.Message):
    __slots__ = ("object_ids", "state")
    class ObjectIdsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    object_ids: _containers.ScalarMap[str, str]
    state: ContextState
    def __init__(self, object_ids: _Optional[_Mapping[str, str]] = ..., state: _Optional[_Union[ContextState, _Mapping]] = ...) -> None: ...

class ContextUpdateRequest(_message.Message):
    __slots__ = ("context_id", "updates")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    updates: _containers.RepeatedCompositeFieldContainer[_objects_pb2.Update]
    def __init__(self, context_id: _Optional[str] = ..., updates: _Optional[_Iterable[_Union[_objects_pb2.Update, _Mapping]]] = ...) -> None: ...

class ContextDeleteRequest(_message.Message):
    __slots__ = ("context_id", "object_ids")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    object_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, context_id: _Optional[str] = ..., object_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ContextSaveRequest(_message.Message):
    __slots__ = ("context_id", "client_transaction_id", "dry_run", "conflicts_in_response")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_IN_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    client_transaction_id: str
    dry_run: bool
    conflicts_in_response: bool
    def __init__(self, context_id: _Optional[str] = ..., client_transaction_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., conflicts_in_response: _Optional[bool] = ...) -> None: ...

class ContextSaveResponse(_message.Message):
    __slots__ = ("result", "state", "saved_to_parent")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SAVED_TO_PARENT_FIELD_NUMBER: _ClassVar[int]
    result: _objects_pb2.SaveResult
    state: ContextState
    saved_to_parent: bool
    def __init__(self, result: _Optional[_Union[_objects_pb2.SaveResult, _Mapping]] = ..., state: _Optional[_Union[ContextState, _Mapping]] = ..., saved_to_parent: _Optional[bool] = ...) -> None: ...

class RefreshRequest(_message.Message):
    __slots__ = ("context_id", "merge_changes")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    MERGE_CHANGES_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    merge_changes: bool
    def __init__(self, context_id: _Optional[str] = ..., merge_changes: _Optional[bool] = ...) -> None: ...

class SetQueryGenerationRequest(_message.Message):
    __slots__ = ("context_id", "generation_mode", "token")
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_MODE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    generation_mode: GenerationMode
    token: bytes
    def __init__(self, context_id: _Optional[str] = ..., generation_mode: _Optional[_Union[GenerationMode, str]] = ..., token: _Optional[bytes] = ...) -> None: ...

class CloseContextResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
