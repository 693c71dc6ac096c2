import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from ubiquity.v1 import objects_pb2 as _objects_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StartPoint(_message.Message):
    __slots__ = ("token", "now", "oldest")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    OLDEST_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    now: bool
    oldest: bool
    def __init__(self, token: _Optional[bytes] = ..., now: _Optional[bool] = ..., oldest: _Optional[bool] = ...) -> None: ...

class ChangeFilter(_message.Message):
    __slots__ = ("entities", "exclude_authors", "include_values", "include_tombstones")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_AUTHORS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_VALUES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedScalarFieldContainer[str]
    exclude_authors: _containers.RepeatedScalarFieldContainer[str]
    include_values: bool
    include_tombstones: bool
    def __init__(self, entities: _Optional[_Iterable[str]] = ..., exclude_authors: _Optional[_Iterable[str]] = ..., include_values: _Optional[bool] = ..., include_tombstones: _Optional[bool] = ...) -> None: ...

class LiveQuery(_message.Message):
    __slots__ = ("entity", "predicate", "arguments")
    class ArgumentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.Argument
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.Argument, _Mapping]] = ...) -> None: ...
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    entity: str
    predicate: str
    arguments: _containers.MessageMap[str, _objects_pb2.Argument]
    def __init__(self, entity: _Optional[str] = ..., predicate: _Optional[str] = ..., arguments: _Optional[_Mapping[str, _objects_pb2.Argument]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("store_id", "filter", "coalesce_window_ms", "live_query", "key_values", "acknowledges_store_events")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    COALESCE_WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    LIVE_QUERY_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGES_STORE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    filter: ChangeFilter
    coalesce_window_ms: int
    live_query: LiveQuery
    key_values: KeyValueSubscription
    acknowledges_store_events: bool
    def __init__(self, store_id: _Optional[str] = ..., filter: _Optional[_Union[ChangeFilter, _Mapping]] = ..., coalesce_window_ms: _Optional[int] = ..., live_query: _Optional[_Union[LiveQuery, _Mapping]] = ..., key_values: _Optional[_Union[KeyValueSubscription, _Mapping]] = ..., acknowledges_store_events: _Optional[bool] = ..., **kwargs) -> None: ...

class KeyValueSubscription(_message.Message):
    __slots__ = ("exclude_authors",)
    EXCLUDE_AUTHORS_FIELD_NUMBER: _ClassVar[int]
    exclude_authors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, exclude_authors: _Optional[_Iterable[str]] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("resume_token", "resume_generation", "transactions", "caught_up", "progress", "cursor_at_risk", "store_event", "key_value_change", "live_query")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESUME_GENERATION_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_AT_RISK_FIELD_NUMBER: _ClassVar[int]
    STORE_EVENT_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    LIVE_QUERY_FIELD_NUMBER: _ClassVar[int]
    resume_token: bytes
    resume_generation: int
    transactions: TransactionBatch
    caught_up: CaughtUp
    progress: Progress
    cursor_at_risk: CursorAtRisk
    store_event: StoreEvent
    key_value_change: KeyValueChange
    live_query: LiveQueryUpdate
    def __init__(self, resume_token: _Optional[bytes] = ..., resume_generation: _Optional[int] = ..., transactions: _Optional[_Union[TransactionBatch, _Mapping]] = ..., caught_up: _Optional[_Union[CaughtUp, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., cursor_at_risk: _Optional[_Union[CursorAtRisk, _Mapping]] = ..., store_event: _Optional[_Union[StoreEvent, _Mapping]] = ..., key_value_change: _Optional[_Union[KeyValueChange, _Mapping]] = ..., live_query: _Optional[_Union[LiveQueryUpdate, _Mapping]] = ...) -> None: ...

class TransactionBatch(_message.Message):
    __slots__ = ("transactions",)
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[Transaction]
    def __init__(self, transactions: _Optional[_Iterable[_Union[Transaction, _Mapping]]] = ...) -> None: ...

class Transaction(_message.Message):
    __slots__ = ("token", "generation", "commit_time", "author", "context_name", "changes", "part")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_NAME_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    generation: int
    commit_time: _timestamp_pb2.Timestamp
    author: str
    context_name: str
    changes: _containers.RepeatedCompositeFieldContainer[Change]
    part: TransactionPart
    def __init__(self, token: _Optional[bytes] = ..., generation: _Optional[int] = ..., commit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author: _Optional[str] = ..., context_name: _Optional[str] = ..., changes: _Optional[_Iterable[_Union[Change, _Mapping]]] = ..., part: _Optional[_Union[TransactionPart, _Mapping]] = ...) -> None: ...

class TransactionPart(_message.Message):
    __slots__ = ("index", "count")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    index: int
    count: int
    def __init__(self, index: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class Change(_message.Message):
    __slots__ = ("kind", "entity", "object_id", "changed_properties", "values", "relationships", "tombstone", "values_unavailable")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[Change.Kind]
        KIND_INSERT: _ClassVar[Change.Kind]
        KIND_UPDATE: _ClassVar[Change.Kind]
        KIND_DELETE: _ClassVar[Change.Kind]
    KIND_UNSPECIFIED: Change.Kind
    KIND_INSERT: Change.Kind
    KIND_UPDATE: Change.Kind
    KIND_DELETE: Change.Kind
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.Value, _Mapping]] = ...) -> None: ...
    class RelationshipsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.ObjectIDList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.ObjectIDList, _Mapping]] = ...) -> None: ...
    class TombstoneEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _objects_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_objects_pb2.Value, _Mapping]] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGED_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIPS_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    VALUES_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    kind: Change.Kind
    entity: str
    object_id: str
    changed_properties: _containers.RepeatedScalarFieldContainer[str]
    values: _containers.MessageMap[str, _objects_pb2.Value]
    relationships: _containers.MessageMap[str, _objects_pb2.ObjectIDList]
    tombstone: _containers.MessageMap[str, _objects_pb2.Value]
    values_unavailable: bool
    def __init__(self, kind: _Optional[_Union[Change.Kind, str]] = ..., entity: _Optional[str] = ..., object_id: _Optional[str] = ..., changed_properties: _Optional[_Iterable[str]] = ..., values: _Optional[_Mapping[str, _objects_pb2.Value]] = ..., relationships: _Optional[_Mapping[str, _objects_pb2.ObjectIDList]] = ..., tombstone: _Optional[_Mapping[str, _objects_pb2.Value]] = ..., values_unavailable: _Optional[bool] = ...) -> None: ...

class CaughtUp(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Progress(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CursorAtRisk(_message.Message):
    __slots__ = ("oldest_retained_token", "expected_expiry")
    OLDEST_RETAINED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_EXPIRY_FIELD_NUMBER: _ClassVar[int]
    oldest_retained_token: bytes
    expected_expiry: _timestamp_pb2.Timestamp
    def __init__(self, oldest_retained_token: _Optional[bytes] = ..., expected_expiry: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StoreEvent(_message.Message):
    __slots__ = ("phase", "transition", "using_local_storage", "import_counts", "acknowledgement", "cancelled")
    class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PHASE_UNSPECIFIED: _ClassVar[StoreEvent.Phase]
        PHASE_WILL_CHANGE: _ClassVar[StoreEvent.Phase]
        PHASE_DID_CHANGE: _ClassVar[StoreEvent.Phase]
    PHASE_UNSPECIFIED: StoreEvent.Phase
    PHASE_WILL_CHANGE: StoreEvent.Phase
    PHASE_DID_CHANGE: StoreEvent.Phase
    class Transition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TRANSITION_UNSPECIFIED: _ClassVar[StoreEvent.Transition]
        TRANSITION_ACCOUNT_ADDED: _ClassVar[StoreEvent.Transition]
        TRANSITION_ACCOUNT_REMOVED: _ClassVar[StoreEvent.Transition]
        TRANSITION_CONTENT_REMOVED: _ClassVar[StoreEvent.Transition]
        TRANSITION_INITIAL_IMPORT_COMPLETED: _ClassVar[StoreEvent.Transition]
    TRANSITION_UNSPECIFIED: StoreEvent.Transition
    TRANSITION_ACCOUNT_ADDED: StoreEvent.Transition
    TRANSITION_ACCOUNT_REMOVED: StoreEvent.Transition
    TRANSITION_CONTENT_REMOVED: StoreEvent.Transition
    TRANSITION_INITIAL_IMPORT_COMPLETED: StoreEvent.Transition
    PHASE_FIELD_NUMBER: _ClassVar[int]
    TRANSITION_FIELD_NUMBER: _ClassVar[int]
    USING_LOCAL_STORAGE_FIELD_NUMBER: _ClassVar[int]
    IMPORT_COUNTS_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGEMENT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    phase: StoreEvent.Phase
    transition: StoreEvent.Transition
    using_local_storage: bool
    import_counts: ImportCounts
    acknowledgement: StoreEventAcknowledgement
    cancelled: bool
    def __init__(self, phase: _Optional[_Union[StoreEvent.Phase, str]] = ..., transition: _Optional[_Union[StoreEvent.Transition, str]] = ..., using_local_storage: _Optional[bool] = ..., import_counts: _Optional[_Union[ImportCounts, _Mapping]] = ..., acknowledgement: _Optional[_Union[StoreEventAcknowledgement, _Mapping]] = ..., cancelled: _Optional[bool] = ...) -> None: ...

class StoreEventAcknowledgement(_message.Message):
    __slots__ = ("event_token", "deadline")
    EVENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    event_token: bytes
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, event_token: _Optional[bytes] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ImportCounts(_message.Message):
    __slots__ = ("inserted", "merged", "deduplicated", "key_values_moved", "key_values_kept")
    INSERTED_FIELD_NUMBER: _ClassVar[int]
    MERGED_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUES_MOVED_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUES_KEPT_FIELD_NUMBER: _ClassVar[int]
    inserted: int
    merged: int
    deduplicated: int
    key_values_moved: int
    key_values_kept: int
    def __init__(self, inserted: _Optional[int] = ..., merged: _Optional[int] = ..., deduplicated: _Optional[int] = ..., key_values_moved: _Optional[int] = ..., key_values_kept: _Optional[int] = ...) -> None: ...

class KeyValueChange(_message.Message):
    __slots__ = ("reason", "key", "value", "version", "deleted", "author")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[KeyValueChange.Reason]
        REASON_SERVER_CHANGE: _ClassVar[KeyValueChange.Reason]
        REASON_INITIAL_SYNC: _ClassVar[KeyValueChange.Reason]
        REASON_QUOTA_VIOLATION: _ClassVar[KeyValueChange.Reason]
        REASON_ACCOUNT_CHANGE: _ClassVar[KeyValueChange.Reason]
    REASON_UNSPECIFIED: KeyValueChange.Reason
    REASON_SERVER_CHANGE: KeyValueChange.Reason
    REASON_INITIAL_SYNC: KeyValueChange.Reason
    REASON_QUOTA_VIOLATION: KeyValueChange.Reason
    REASON_ACCOUNT_CHANGE: KeyValueChange.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    reason: KeyValueChange.Reason
    key: str
    value: bytes
    version: int
    deleted: bool
    author: str
    def __init__(self, reason: _Optional[_Union[KeyValueChange.Reason, str]] = ..., key: _Optional[str] = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ..., deleted: _Optional[bool] = ..., author: _Optional[str] = ...) -> None: ...

class LiveQueryUpdate(_message.Message):
    __slots__ = ("token", "generation", "entered", "changed", "left_object_ids")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    ENTERED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    LEFT_OBJECT_IDS_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    generation: int
    entered: _containers.RepeatedCompositeFieldContainer[LiveQueryObject]
    changed: _containers.RepeatedCompositeFieldContainer[LiveQueryObject]
    left_object_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, token: _Optional[bytes] = ..., generation: _Optional[int] = ..., entered: _Optional[_Iterable[_Union[LiveQueryObject, _Mapping]]] = ..., changed: _Optional[_Iterable[_Union[LiveQueryObject, _Mapping]]] = ..., left_object_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class LiveQueryObject(_message.Message):
    __slots__ = ("object_id", "object")
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    object_id: str
    object: _objects_pb2.ManagedObject
    def __init__(self, object_id: _Optional[str] = ..., object: _Optional[_Union[_objects_pb2.ManagedObject, _Mapping]] = ...) -> None: ...

class FetchHistoryRequest(_message.Message):
    __slots__ = ("store_id", "filter", "page_size")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    filter: ChangeFilter
    page_size: int
    def __init__(self, store_id: _Optional[str] = ..., filter: _Optional[_Union[ChangeFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., **kwargs) -> None: ...

class FetchHistoryResponse(_message.Message):
    __slots__ = ("transactions", "next_token", "has_more", "current_token")
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[Transaction]
    next_token: bytes
    has_more: bool
    current_token: bytes
    def __init__(self, transactions: _Optional[_Iterable[_Union[Transaction, _Mapping]]] = ..., next_token: _Optional[bytes] = ..., has_more: _Optional[bool] = ..., current_token: _Optional[bytes] = ...) -> None: ...

class DeleteHistoryRequest(_message.Message):
    __slots__ = ("store_id", "through_token")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    THROUGH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    through_token: bytes
    def __init__(self, store_id: _Optional[str] = ..., through_token: _Optional[bytes] = ...) -> None: ...

class DeleteHistoryResponse(_message.Message):
    __slots__ = ("oldest_retained_token",)
    OLDEST_RETAINED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    oldest_retained_token: bytes
    def __init__(self, oldest_retained_token: _Optional[bytes] = ...) -> None: ...

class FetchDeletionsRequest(_message.Message):
    __slots__ = ("store_id", "after_token", "entities", "page_size")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    after_token: bytes
    entities: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    def __init__(self, store_id: _Optional[str] = ..., after_token: _Optional[bytes] = ..., entities: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ...) -> None: ...

class FetchDeletionsResponse(_message.Message):
    __slots__ = ("deletions", "next_token", "has_more", "current_token")
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    deletions: _containers.RepeatedCompositeFieldContainer[DeletedObject]
    next_token: bytes
    has_more: bool
    current_token: bytes
    def __init__(self, deletions: _Optional[_Iterable[_Union[DeletedObject, _Mapping]]] = ..., next_token: _Optional[bytes] = ..., has_more: _Optional[bool] = ..., current_token: _Optional[bytes] = ...) -> None: ...

class DeletedObject(_message.Message):
    __slots__ = ("object_id", "entity", "generation")
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    object_id: str
    entity: str
    generation: int
    def __init__(self, object_id: _Optional[str] = ..., entity: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class AcknowledgeStoreEventRequest(_message.Message):
    __slots__ = ("event_token",)
    EVENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    event_token: bytes
    def __init__(self, event_token: _Optional[bytes] = ...) -> None: ...

class AcknowledgeStoreEventResponse(_message.Message):
    __slots__ = ("awaited",)
    AWAITED_FIELD_NUMBER: _ClassVar[int]
    awaited: bool
    def __init__(self, awaited: _Optional[bool] = ...) -> None: ...

class HistoryExpiredDetails(_message.Message):
    __slots__ = ("oldest_retained_token", "current_token", "deletions_available")
    OLDEST_RETAINED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DELETIONS_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    oldest_retained_token: bytes
    current_token: bytes
    deletions_available: bool
    def __init__(self, oldest_retained_token: _Optional[bytes] = ..., current_token: _Optional[bytes] = ..., deletions_available: _Optional[bool] = ...) -> None: ...

class ResumeDetails(_message.Message):
    __slots__ = ("resume_token", "resume_generation")
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESUME_GENERATION_FIELD_NUMBER: _ClassVar[int]
    resume_token: bytes
    resume_generation: int
    def __init__(self, resume_token: _Optional[bytes] = ..., resume_generation: _Optional[int] = ...) -> None: ...
