from ubiquity.v1 import objects_pb2 as _objects_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AttributeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTRIBUTE_TYPE_UNSPECIFIED: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_STRING: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_BOOL: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_INT16: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_INT32: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_INT64: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_FLOAT: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_DOUBLE: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_DECIMAL: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_DATE: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_BINARY: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_UUID: _ClassVar[AttributeType]
    ATTRIBUTE_TYPE_URI: _ClassVar[AttributeType]

class DeleteRule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELETE_RULE_UNSPECIFIED: _ClassVar[DeleteRule]
    DELETE_RULE_NULLIFY: _ClassVar[DeleteRule]
    DELETE_RULE_CASCADE: _ClassVar[DeleteRule]
    DELETE_RULE_DENY: _ClassVar[DeleteRule]
    DELETE_RULE_NO_ACTION: _ClassVar[DeleteRule]
ATTRIBUTE_TYPE_UNSPECIFIED: AttributeType
ATTRIBUTE_TYPE_STRING: AttributeType
ATTRIBUTE_TYPE_BOOL: AttributeType
ATTRIBUTE_TYPE_INT16: AttributeType
ATTRIBUTE_TYPE_INT32: AttributeType
ATTRIBUTE_TYPE_INT64: AttributeType
ATTRIBUTE_TYPE_FLOAT: AttributeType
ATTRIBUTE_TYPE_DOUBLE: AttributeType
ATTRIBUTE_TYPE_DECIMAL: AttributeType
ATTRIBUTE_TYPE_DATE: AttributeType
ATTRIBUTE_TYPE_BINARY: AttributeType
ATTRIBUTE_TYPE_UUID: AttributeType
ATTRIBUTE_TYPE_URI: AttributeType
DELETE_RULE_UNSPECIFIED: DeleteRule
DELETE_RULE_NULLIFY: DeleteRule
DELETE_RULE_CASCADE: DeleteRule
DELETE_RULE_DENY: DeleteRule
DELETE_RULE_NO_ACTION: DeleteRule

class Attribute(_message.Message):
    __slots__ = ("name", "type", "required", "default_value", "minimum", "maximum", "keep_on_delete", "renaming_identifier")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_VALUE_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    KEEP_ON_DELETE_FIELD_NUMBER: _ClassVar[int]
    RENAMING_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: AttributeType
    required: bool
    default_value: _objects_pb2.Value
    minimum: float
    maximum: float
    keep_on_delete: bool
    renaming_identifier: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AttributeType, str]] = ..., required: _Optional[bool] = ..., default_value: _Optional[_Union[_objects_pb2.Value, _Mapping]] = ..., minimum: _Optional[float] = ..., maximum: _Optional[float] = ..., keep_on_delete: _Optional[bool] = ..., renaming_identifier: _Optional[str] = ...) -> None: ...

class Relationship(_message.Message):
    __slots__ = ("name", "destination", "to_many", "inverse", "delete_rule", "required", "min_count", "max_count", "renaming_identifier")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    TO_MANY_FIELD_NUMBER: _ClassVar[int]
    INVERSE_FIELD_NUMBER: _ClassVar[int]
    DELETE_RULE_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    MIN_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    RENAMING_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    name: str
    destination: str
    to_many: bool
    inverse: str
    delete_rule: DeleteRule
    required: bool
    min_count: int
    max_count: int
    renaming_identifier: str
    def __init__(self, name: _Optional[str] = ..., destination: _Optional[str] = ..., to_many: _Optional[bool] = ..., inverse: _Optional[str] = ..., delete_rule: _Optional[_Union[DeleteRule, str]] = ..., required: _Optional[bool] = ..., min_count: _Optional[int] = ..., max_count: _Optional[int] = ..., renaming_identifier: _Optional[str] = ...) -> None: ...

class PropertyList(_message.Message):
    __slots__ = ("properties",)
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, properties: _Optional[_Iterable[str]] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("name", "parent", "is_abstract", "attributes", "relationships", "indexes", "uniqueness_constraints", "renaming_identifier")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    IS_ABSTRACT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIPS_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    UNIQUENESS_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    RENAMING_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    name: str
    parent: str
    is_abstract: bool
    attributes: _containers.RepeatedCompositeFieldContainer[Attribute]
    relationships: _containers.RepeatedCompositeFieldContainer[Relationship]
    indexes: _containers.RepeatedCompositeFieldContainer[PropertyList]
    uniqueness_constraints: _containers.RepeatedCompositeFieldContainer[PropertyList]
    renaming_identifier: str
    def __init__(self, name: _Optional[str] = ..., parent: _Optional[str] = ..., is_abstract: _Optional[bool] = ..., attributes: _Optional[_Iterable[_Union[Attribute, _Mapping]]] = ..., relationships: _Optional[_Iterable[_Union[Relationship, _Mapping]]] = ..., indexes: _Optional[_Iterable[_Union[PropertyList, _Mapping]]] = ..., uniqueness_constraints: _Optional[_Iterable[_Union[PropertyList, _Mapping]]] = ..., renaming_identifier: _Optional[str] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("version_identifier", "entities")
    VERSION_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    version_identifier: str
    entities: _containers.RepeatedCompositeFieldContainer[Entity]
    def __init__(self, version_identifier: _Optional[str] = ..., entities: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ...) -> None: ...

class RegisterModelRequest(_message.Message):
    __slots__ = ("store_id", "model", "dry_run")
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    model: Model
    dry_run: bool
    def __init__(self, store_id: _Optional[str] = ..., model: _Optional[_Union[Model, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RegisterModelResponse(_message.Message):
    __slots__ = ("from_version_hash", "version_hash", "steps", "dry_run", "token", "unchanged")
    FROM_VERSION_HASH_FIELD_NUMBER: _ClassVar[int]
    VERSION_HASH_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    from_version_hash: str
    version_hash: str
    steps: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    token: bytes
    unchanged: bool
    def __init__(self, from_version_hash: _Optional[str] = ..., version_hash: _Optional[str] = ..., steps: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ..., token: _Optional[bytes] = ..., unchanged: _Optional[bool] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("store_id",)
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    store_id: str
    def __init__(self, store_id: _Optional[str] = ...) -> None: ...

class GetModelResponse(_message.Message):
    __slots__ = ("model", "version_hash")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_HASH_FIELD_NUMBER: _ClassVar[int]
    model: Model
    version_hash: str
    def __init__(self, model: _Optional[_Union[Model, _Mapping]] = ..., version_hash: _Optional[str] = ...) -> None: ...
