import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MergePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MERGE_POLICY_UNSPECIFIED: _ClassVar[MergePolicy]
    MERGE_POLICY_ERROR: _ClassVar[MergePolicy]
    MERGE_POLICY_MERGE_BY_PROPERTY_STORE_TRUMP: _ClassVar[MergePolicy]
    MERGE_POLICY_MERGE_BY_PROPERTY_OBJECT_TRUMP: _ClassVar[MergePolicy]
    MERGE_POLICY_OVERWRITE: _ClassVar[MergePolicy]
    MERGE_POLICY_ROLLBACK: _ClassVar[MergePolicy]

class ResultType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESULT_TYPE_UNSPECIFIED: _ClassVar[ResultType]
    RESULT_TYPE_OBJECTS: _ClassVar[ResultType]
    RESULT_TYPE_OBJECT_IDS: _ClassVar[ResultType]
    RESULT_TYPE_DICTIONARIES: _ClassVar[ResultType]
    RESULT_TYPE_COUNT: _ClassVar[ResultType]
MERGE_POLICY_UNSPECIFIED: MergePolicy
MERGE_POLICY_ERROR: MergePolicy
MERGE_POLICY_MERGE_BY_PROPERTY_STORE_TRUMP: MergePolicy
MERGE_POLICY_MERGE_BY_PROPERTY_OBJECT_TRUMP: MergePolicy
MERGE_POLICY_OVERWRITE: MergePolicy
MERGE_POLICY_ROLLBACK: MergePolicy
RESULT_TYPE_UNSPECIFIED: ResultType
RESULT_TYPE_OBJECTS: ResultType
RESULT_TYPE_OBJECT_IDS: ResultType
RESULT_TYPE_DICTIONARIES: ResultType
RESULT_TYPE_COUNT: ResultType

class Value(_message.Message):
    __slots__ = ("null_value", "string_value", "bool_value", "int16_value", "int32_value", "int64_value", "float_value", "double_value", "decimal_value", "date_value", "binary_value", "uuid_value", "uri_value")
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT16_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT32_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    DATE_VALUE_FIELD_NUMBER: _ClassVar[int]
    BINARY_VALUE_FIELD_NUMBER: _ClassVar[int]
    UUID_VALUE_FIELD_NUMBER: _ClassVar[int]
    URI_VALUE_FIELD_NUMBER: _ClassVar[int]
    null_value: _struct_pb2.NullValue
    string_value: str
    bool_value: bool
    int16_value: int
    int32_value: int
    int64_value: int
    float_value: float
    double_value: float
    decimal_value: str
    date_value: _timestamp_pb2.Timestamp
    binary_value: bytes
    uuid_value: str
    uri_value: str
    def __init__(self, null_value: _Optional[_Union[_struct_pb2.NullValue, str]] = ..., string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., int16_value: _Optional[int] = ..., int32_value: _Optional[int] = ..., int64_value: _Optional[int] = ..., float_value: _Optional[float] = ..., double_value: _Optional[float] = ..., decimal_value: _Optional[str] = ..., date_value: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., binary_value: _Optional[bytes] = ..., uuid_value: _Optional[str] = ..., uri_value: _Optional[str] = ...) -> None: ...

class ValueList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class Argument(_message.Message):
    __slots__ = ("value", "list")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    value: Value
    list: ValueList
    def __init__(self, value: _Optional[_Union[Value, _Mapping]] = ..., list: _Optional[_Union[ValueList, _Mapping]] = ...) -> None: ...

class ObjectIDList(_message.Message):
    __slots__ = ("object_ids",)
    OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    object_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, object_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ManagedObject(_message.Message):
    __slots__ = ("object_id", "entity", "version", "values", "relationships")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    class RelationshipsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ObjectIDList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ObjectIDList, _Mapping]] = ...) -> None: ...
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIPS_FIELD_NUMBER: _ClassVar[int]
    object_id: str
    entity: str
    version: int
    values: _containers.MessageMap[str, Value]
    relationships: _containers.MessageMap[str, ObjectIDList]
    def __init__(self, object_id: _Optional[str] = ..., entity: _Optional[str] = ..., version: _Optional[int] = ..., values: _Optional[_Mapping[str, Value]] = ..., relationships: _Optional[_Mapping[str, ObjectIDList]] = ...) -> None: ...

class ObjectRef(_message.Message):
    __slots__ = ("temporary_id", "object_id")
    TEMPORARY_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    temporary_id: str
    object_id: str
    def __init__(self, temporary_id: _Optional[str] = ..., object_id: _Optional[str] = ...) -> None: ...

class ObjectRefList(_message.Message):
    __slots__ = ("refs",)
    REFS_FIELD_NUMBER: _ClassVar[int]
    refs: _containers.RepeatedCompositeFieldContainer[ObjectRef]
    def __init__(self, refs: _Optional[_Iterable[_Union[ObjectRef, _Mapping]]] = ...) -> None: ...

class Insert(_message.Message):
    __slots__ = ("temporary_id", "entity", "values", "relationships")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    class RelationshipsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ObjectRefList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ObjectRefList, _Mapping]] = ...) -> None: ...
    TEMPORARY_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIPS_FIELD_NUMBER: _ClassVar[int]
    temporary_id: str
    entity: str
    values: _containers.MessageMap[str, Value]
    relationships: _containers.MessageMap[str, ObjectRefList]
    def __init__(self, temporary_id: _Optional[str] = ..., entity: _Optional[str] = ..., values: _Optional[_Mapping[str, Value]] = ..., relationships: _Optional[_Mapping[str, ObjectRefList]] = ...) -> None: ...

class Update(_message.Message):
    __slots__ = ("object_id", "expected_version", "values", "relationships", "snapshot")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    class RelationshipsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ObjectRefList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ObjectRefList, _Mapping]] = ...) -> None: ...
    class SnapshotEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIPS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    object_id: str
    expected_version: int
    values: _containers.MessageMap[str, Value]
    relationships: _containers.MessageMap[str, ObjectRefList]
    snapshot: _containers.MessageMap[str, Value]
    def __init__(self, object_id: _Optional[str] = ..., expected_version: _Optional[int] = ..., values: _Optional[_Mapping[str, Value]] = ..., relationships: _Optional[_Mapping[str, ObjectRefList]] = ..., snapshot: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class Delete(_message.Message):
    __slots__ = ("object_id", "expected_version")
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    object_id: str
    expected_version: int
    def __init__(self, object_id: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class ReadGeneration(_message.Message):
    __slots__ = ("token", "minimum_generation")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_GENERATION_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    minimum_generation: int
    def __init__(self, token: _Optional[bytes] = ..., minimum_generation: _Optional[int] = ...) -> None: ...

class SortDescriptor(_message.Message):
    __slots__ = ("key_path", "descending", "case_insensitive")
    KEY_PATH_FIELD_NUMBER: _ClassVar[int]
    DESCENDING_FIELD_NUMBER: _ClassVar[int]
    CASE_INSENSITIVE_FIELD_NUMBER: _ClassVar[int]
    key_path: str
    descending: bool
    case_insensitive: bool
    def __init__(self, key_path: _Optional[str] = ..., descending: _Optional[bool] = ..., case_insensitive: _Optional[bool] = ...) -> None: ...

class FetchSpec(_message.Message):
    __slots__ = ("entity", "predicate", "variables", "sort_descriptors", "fetch_limit", "fetch_offset", "fetch_batch_size", "result_type", "properties_to_fetch", "properties_to_group_by", "having_predicate", "returns_distinct_results", "relationship_key_paths_for_prefetching", "excludes_subentities")
    class VariablesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Argument
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Argument, _Mapping]] = ...) -> None: ...
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    SORT_DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    FETCH_LIMIT_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FETCH_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    RESULT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_TO_FETCH_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_TO_GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    HAVING_PREDICATE_FIELD_NUMBER: _ClassVar[int]
    RETURNS_DISTINCT_RESULTS_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIP_KEY_PATHS_FOR_PREFETCHING_FIELD_NUMBER: _ClassVar[int]
    EXCLUDES_SUBENTITIES_FIELD_NUMBER: _ClassVar[int]
    entity: str
    predicate: str
    variables: _containers.MessageMap[str, Argument]
    sort_descriptors: _containers.RepeatedCompositeFieldContainer[SortDescriptor]
    fetch_limit: int
    fetch_offset: int
    fetch_batch_size: int
    result_type: ResultType
    properties_to_fetch: _containers.RepeatedScalarFieldContainer[str]
    properties_to_group_by: _containers.RepeatedScalarFieldContainer[str]
    having_predicate: str
    returns_distinct_results: bool
    relationship_key_paths_for_prefetching: _containers.RepeatedScalarFieldContainer[str]
    excludes_subentities: bool
    def __init__(self, entity: _Optional[str] = ..., predicate: _Optional[str] = ..., variables: _Optional[_Mapping[str, Argument]] = ..., sort_descriptors: _Optional[_Iterable[_Union[SortDescriptor, _Mapping]]] = ..., fetch_limit: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., fetch_batch_size: _Optional[int] = ..., result_type: _Optional[_Union[ResultType, str]] = ..., properties_to_fetch: _Optional[_Iterable[str]] = ..., properties_to_group_by: _Optional[_Iterable[str]] = ..., having_predicate: _Optional[str] = ..., returns_distinct_results: _Optional[bool] = ..., relationship_key_paths_for_prefetching: _Optional[_Iterable[str]] = ..., excludes_subentities: _Optional[bool] = ...) -> None: ...

class Row(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.MessageMap[str, Value]
    def __init__(self, values: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class FetchResults(_message.Message):
    __slots__ = ("token", "objects", "object_ids", "rows", "count", "prefetched")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    PREFETCHED_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    objects: _containers.RepeatedCompositeFieldContainer[ManagedObject]
    object_ids: _containers.RepeatedScalarFieldContainer[str]
    rows: _containers.RepeatedCompositeFieldContainer[Row]
    count: int
    prefetched: _containers.RepeatedCompositeFieldContainer[ManagedObject]
    def __init__(self, token: _Optional[bytes] = ..., objects: _Optional[_Iterable[_Union[ManagedObject, _Mapping]]] = ..., object_ids: _Optional[_Iterable[str]] = ..., rows: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., count: _Optional[int] = ..., prefetched: _Optional[_Iterable[_Union[ManagedObject, _Mapping]]] = ...) -> None: ...

class SaveResult(_message.Message):
    __slots__ = ("token", "generation", "permanent_ids", "versions", "resolved_conflicts", "skipped_object_ids", "dry_run", "replayed", "unresolved_conflicts")
    class PermanentIdsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class VersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_IDS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    UNRESOLVED_CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    generation: int
    permanent_ids: _containers.ScalarMap[str, str]
    versions: _containers.ScalarMap[str, int]
    resolved_conflicts: _containers.RepeatedCompositeFieldContainer[ConflictRecord]
    skipped_object_ids: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    replayed: bool
    unresolved_conflicts: _containers.RepeatedCompositeFieldContainer[ConflictRecord]
    def __init__(self, token: _Optional[bytes] = ..., generation: _Optional[int] = ..., permanent_ids: _Optional[_Mapping[str, str]] = ..., versions: _Optional[_Mapping[str, int]] = ..., resolved_conflicts: _Optional[_Iterable[_Union[ConflictRecord, _Mapping]]] = ..., skipped_object_ids: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ..., replayed: _Optional[bool] = ..., unresolved_conflicts: _Optional[_Iterable[_Union[ConflictRecord, _Mapping]]] = ...) -> None: ...

class ConflictRecord(_message.Message):
    __slots__ = ("kind", "object_id", "temporary_id", "entity", "client_snapshot", "client_changes", "store_values", "client_version", "store_version", "constraint")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[ConflictRecord.Kind]
        KIND_VERSION_CHANGED: _ClassVar[ConflictRecord.Kind]
        KIND_DELETED_IN_STORE: _ClassVar[ConflictRecord.Kind]
        KIND_UNIQUENESS_CLASH: _ClassVar[ConflictRecord.Kind]
    KIND_UNSPECIFIED: ConflictRecord.Kind
    KIND_VERSION_CHANGED: ConflictRecord.Kind
    KIND_DELETED_IN_STORE: ConflictRecord.Kind
    KIND_UNIQUENESS_CLASH: ConflictRecord.Kind
    class ClientSnapshotEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    class ClientChangesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    class StoreValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    TEMPORARY_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_CHANGES_FIELD_NUMBER: _ClassVar[int]
    STORE_VALUES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    kind: ConflictRecord.Kind
    object_id: str
    temporary_id: str
    entity: str
    client_snapshot: _containers.MessageMap[str, Value]
    client_changes: _containers.MessageMap[str, Value]
    store_values: _containers.MessageMap[str, Value]
    client_version: int
    store_version: int
    constraint: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, kind: _Optional[_Union[ConflictRecord.Kind, str]] = ..., object_id: _Optional[str] = ..., temporary_id: _Optional[str] = ..., entity: _Optional[str] = ..., client_snapshot: _Optional[_Mapping[str, Value]] = ..., client_changes: _Optional[_Mapping[str, Value]] = ..., store_values: _Optional[_Mapping[str, Value]] = ..., client_version: _Optional[int] = ..., store_version: _Optional[int] = ..., constraint: _Optional[_Iterable[str]] = ...) -> None: ...

class ConflictDetails(_message.Message):
    __slots__ = ("conflicts", "truncated", "total_conflicts")
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    conflicts: _containers.RepeatedCompositeFieldContainer[ConflictRecord]
    truncated: bool
    total_conflicts: int
    def __init__(self, conflicts: _Optional[_Iterable[_Union[ConflictRecord, _Mapping]]] = ..., truncated: _Optional[bool] = ..., total_conflicts: _Optional[int] = ...) -> None: ...
