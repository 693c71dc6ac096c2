from ubiquity.v1 import objects_pb2 as _objects_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StoreInfo(_message.Message):
    __slots__ = ("store_id", "name", "model_version_hash", "token", "generation")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_HASH_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    name: str
    model_version_hash: str
    token: bytes
    generation: int
    def __init__(self, store_id: _Optional[str] = ..., name: _Optional[str] = ..., model_version_hash: _Optional[str] = ..., token: _Optional[bytes] = ..., generation: _Optional[int] = ...) -> None: ...

class OpenStoreRequest(_message.Message):
    __slots__ = ("name", "must_exist")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MUST_EXIST_FIELD_NUMBER: _ClassVar[int]
    name: str
    must_exist: bool
    def __init__(self, name: _Optional[str] = ..., must_exist: _Optional[bool] = ...) -> None: ...

class OpenStoreResponse(_message.Message):
    __slots__ = ("store", "created")
    STORE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    store: StoreInfo
    created: bool
    def __init__(self, store: _Optional[_Union[StoreInfo, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class ListStoresRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListStoresResponse(_message.Message):
    __slots__ = ("stores",)
    STORES_FIELD_NUMBER: _ClassVar[int]
    stores: _containers.RepeatedCompositeFieldContainer[StoreInfo]
    def __init__(self, stores: _Optional[_Iterable[_Union[StoreInfo, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("store_id", "fetch", "at")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    fetch: _objects_pb2.FetchSpec
    at: _objects_pb2.ReadGeneration
    def __init__(self, store_id: _Optional[str] = ..., fetch: _Optional[_Union[_objects_pb2.FetchSpec, _Mapping]] = ..., at: _Optional[_Union[_objects_pb2.ReadGeneration, _Mapping]] = ...) -> None: ...

class GetObjectsRequest(_message.Message):
    __slots__ = ("store_id", "object_ids", "at")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    object_ids: _containers.RepeatedScalarFieldContainer[str]
    at: _objects_pb2.ReadGeneration
    def __init__(self, store_id: _Optional[str] = ..., object_ids: _Optional[_Iterable[str]] = ..., at: _Optional[_Union[_objects_pb2.ReadGeneration, _Mapping]] = ...) -> None: ...

class GetObjectsResponse(_message.Message):
    __slots__ = ("token", "objects", "missing_object_ids")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    MISSING_OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    objects: _containers.RepeatedCompositeFieldContainer[_objects_pb2.ManagedObject]
    missing_object_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, token: _Optional[bytes] = ..., objects: _Optional[_Iterable[_Union[_objects_pb2.ManagedObject, _Mapping]]] = ..., missing_object_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class SaveRequest(_message.Message):
    __slots__ = ("store_id", "inserts", "updates", "deletes", "merge_policy", "author", "context_name", "client_transaction_id", "dry_run", "conflicts_in_response")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    INSERTS_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    DELETES_FIELD_NUMBER: _ClassVar[int]
    MERGE_POLICY_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_IN_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    inserts: _containers.RepeatedCompositeFieldContainer[_objects_pb2.Insert]
    updates: _containers.RepeatedCompositeFieldContainer[_objects_pb2.Update]
    deletes: _containers.RepeatedCompositeFieldContainer[_objects_pb2.Delete]
    merge_policy: _objects_pb2.MergePolicy
    author: str
    context_name: str
    client_transaction_id: str
    dry_run: bool
    conflicts_in_response: bool
    def __init__(self, store_id: _Optional[str] = ..., inserts: _Optional[_Iterable[_Union[_objects_pb2.Insert, _Mapping]]] = ..., updates: _Optional[_Iterable[_Union[_objects_pb2.Update, _Mapping]]] = ..., deletes: _Optional[_Iterable[_Union[_objects_pb2.Delete, _Mapping]]] = ..., merge_policy: _Optional[_Union[_objects_pb2.MergePolicy, str]] = ..., author: _Optional[str] = ..., context_name: _Optional[str] = ..., client_transaction_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., conflicts_in_response: _Optional[bool] = ...) -> None: ...

class ObjectValues(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.Value, _Mapping]] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.MessageMap[str, _objects_pb2.Value]
    def __init__(self, values: _Optional[_Mapping[str, _objects_pb2.Value]] = ...) -> None: ...

class BatchInsertRequest(_message.Message):
    __slots__ = ("store_id", "entity", "objects", "upsert", "author", "return_object_ids")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    RETURN_OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    entity: str
    objects: _containers.RepeatedCompositeFieldContainer[ObjectValues]
    upsert: bool
    author: str
    return_object_ids: bool
    def __init__(self, store_id: _Optional[str] = ..., entity: _Optional[str] = ..., objects: _Optional[_Iterable[_Union[ObjectValues, _Mapping]]] = ..., upsert: _Optional[bool] = ..., author: _Optional[str] = ..., return_object_ids: _Optional[bool] = ...) -> None: ...

class BatchUpdateRequest(_message.Message):
    __slots__ = ("store_id", "entity", "predicate", "variables", "values", "author")
    class VariablesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.Argument
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.Argument, _Mapping]] = ...) -> None: ...
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.Value, _Mapping]] = ...) -> None: ...
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    entity: str
    predicate: str
    variables: _containers.MessageMap[str, _objects_pb2.Argument]
    values: _containers.MessageMap[str, _objects_pb2.Value]
    author: str
    def __init__(self, store_id: _Optional[str] = ..., entity: _Optional[str] = ..., predicate: _Optional[str] = ..., variables: _Optional[_Mapping[str, _objects_pb2.Argument]] = ..., values: _Optional[_Mapping[str, _objects_pb2.Value]] = ..., author: _Optional[str] = ...) -> None: ...

class BatchDeleteRequest(_message.Message):
    __slots__ = ("store_id", "entity", "predicate", "variables", "object_ids", "author")
    class VariablesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.Argument
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.Argument, _Mapping]] = ...) -> None: ...
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    entity: str
    predicate: str
    variables: _containers.MessageMap[str, _objects_pb2.Argument]
    object_ids: _containers.RepeatedScalarFieldContainer[str]
    author: str
    def __init__(self, store_id: _Optional[str] = ..., entity: _Optional[str] = ..., predicate: _Optional[str] = ..., variables: _Optional[_Mapping[str, _objects_pb2.Argument]] = ..., object_ids: _Optional[_Iterable[str]] = ..., author: _Optional[str] = ...) -> None: ...

class BatchResponse(_message.Message):
    __slots__ = ("token", "count", "object_ids")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    count: int
    object_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, token: _Optional[bytes] = ..., count: _Optional[int] = ..., object_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CurrentGenerationRequest(_message.Message):
    __slots__ = ("store_id",)
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    def __init__(self, store_id: _Optional[str] = ...) -> None: ...

class CurrentGenerationResponse(_message.Message):
    __slots__ = ("token", "generation")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    generation: int
    def __init__(self, token: _Optional[bytes] = ..., generation: _Optional[int] = ...) -> None: ...

class DeduplicateRequest(_message.Message):
    __slots__ = ("store_id", "entity", "unique_key", "batch_size", "author")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    entity: str
    unique_key: _containers.RepeatedScalarFieldContainer[str]
    batch_size: int
    author: str
    def __init__(self, store_id: _Optional[str] = ..., entity: _Optional[str] = ..., unique_key: _Optional[_Iterable[str]] = ..., batch_size: _Optional[int] = ..., author: _Optional[str] = ...) -> None: ...

class DuplicateGroup(_message.Message):
    __slots__ = ("winner_object_id", "removed_object_ids")
    WINNER_OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    REMOVED_OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    winner_object_id: str
    removed_object_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, winner_object_id: _Optional[str] = ..., removed_object_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeduplicateResponse(_message.Message):
    __slots__ = ("token", "groups", "removed", "details")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    groups: int
    removed: int
    details: _containers.RepeatedCompositeFieldContainer[DuplicateGroup]
    def __init__(self, token: _Optional[bytes] = ..., groups: _Optional[int] = ..., removed: _Optional[int] = ..., details: _Optional[_Iterable[_Union[DuplicateGroup, _Mapping]]] = ...) -> None: ...

class SeedRequest(_message.Message):
    __slots__ = ("store_id", "seed_id", "inserts", "author")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    SEED_ID_FIELD_NUMBER: _ClassVar[int]
    INSERTS_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    seed_id: str
    inserts: _containers.RepeatedCompositeFieldContainer[_objects_pb2.Insert]
    author: str
    def __init__(self, store_id: _Optional[str] = ..., seed_id: _Optional[str] = ..., inserts: _Optional[_Iterable[_Union[_objects_pb2.Insert, _Mapping]]] = ..., author: _Optional[str] = ...) -> None: ...

class SeedResponse(_message.Message):
    __slots__ = ("token", "applied", "permanent_ids")
    class PermanentIdsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_IDS_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    applied: bool
    permanent_ids: _containers.ScalarMap[str, str]
    def __init__(self, token: _Optional[bytes] = ..., applied: _Optional[bool] = ..., permanent_ids: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ExportBaselineRequest(_message.Message):
    __slots__ = ("store_id", "at", "batch_size")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    at: _objects_pb2.ReadGeneration
    batch_size: int
    def __init__(self, store_id: _Optional[str] = ..., at: _Optional[_Union[_objects_pb2.ReadGeneration, _Mapping]] = ..., batch_size: _Optional[int] = ...) -> None: ...

class BaselineChunk(_message.Message):
    __slots__ = ("token", "model_version_hash", "objects", "last", "total")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_HASH_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    model_version_hash: str
    objects: _containers.RepeatedCompositeFieldContainer[_objects_pb2.ManagedObject]
    last: bool
    total: int
    def __init__(self, token: _Optional[bytes] = ..., model_version_hash: _Optional[str] = ..., objects: _Optional[_Iterable[_Union[_objects_pb2.ManagedObject, _Mapping]]] = ..., last: _Optional[bool] = ..., total: _Optional[int] = ...) -> None: ...

class ImportStoreRequest(_message.Message):
    __slots__ = ("store_id", "source_store_id", "source_at", "deduplicate_by_constraints", "author")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_STORE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_AT_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATE_BY_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    source_store_id: str
    source_at: _objects_pb2.ReadGeneration
    deduplicate_by_constraints: bool
    author: str
    def __init__(self, store_id: _Optional[str] = ..., source_store_id: _Optional[str] = ..., source_at: _Optional[_Union[_objects_pb2.ReadGeneration, _Mapping]] = ..., deduplicate_by_constraints: _Optional[bool] = ..., author: _Optional[str] = ...) -> None: ...

class ImportStoreResponse(_message.Message):
    __slots__ = ("token", "imported", "object_id_map")
    class ObjectIdMapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    IMPORTED_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_MAP_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    imported: int
    object_id_map: _containers.ScalarMap[str, str]
    def __init__(self, token: _Optional[bytes] = ..., imported: _Optional[int] = ..., object_id_map: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DestroyStoreRequest(_message.Message):
    __slots__ = ("store_id",)
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    def __init__(self, store_id: _Optional[str] = ...) -> None: ...

class DestroyStoreResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReplaceStoreRequest(_message.Message):
    __slots__ = ("store_id", "source_store_id")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_STORE_ID_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    source_store_id: str
    def __init__(self, store_id: _Optional[str] = ..., source_store_id: _Optional[str] = ...) -> None: ...

class ReplaceStoreResponse(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    def __init__(self, token: _Optional[bytes] = ...) -> None: ...
