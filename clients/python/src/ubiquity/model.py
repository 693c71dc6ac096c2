"""Plain Python views of what the server returns: objects, fetch results, save outcomes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from ubiquity.v1 import objects_pb2 as ob
from ubiquity.v1 import stores_pb2 as st

from .errors import Conflict
from .values import PyValue, from_values, to_argument


@dataclass(frozen=True)
class StoreInfo:
    id: str
    name: str
    model_version_hash: str
    token: bytes
    generation: int

    @staticmethod
    def of(s: st.StoreInfo) -> "StoreInfo":
        return StoreInfo(s.store_id, s.name, s.model_version_hash, s.token, s.generation)


class MergePolicy(Enum):
    """How a save resolves objects changed in the store since they were read (SPEC's NSMergePolicy)."""

    ERROR = ob.MERGE_POLICY_ERROR
    STORE_TRUMP = ob.MERGE_POLICY_MERGE_BY_PROPERTY_STORE_TRUMP
    OBJECT_TRUMP = ob.MERGE_POLICY_MERGE_BY_PROPERTY_OBJECT_TRUMP
    OVERWRITE = ob.MERGE_POLICY_OVERWRITE
    ROLLBACK = ob.MERGE_POLICY_ROLLBACK


class ResultType(Enum):
    OBJECTS = ob.RESULT_TYPE_OBJECTS
    OBJECT_IDS = ob.RESULT_TYPE_OBJECT_IDS
    DICTIONARIES = ob.RESULT_TYPE_DICTIONARIES
    COUNT = ob.RESULT_TYPE_COUNT


@dataclass(frozen=True)
class Object:
    """One object as read at a generation."""

    id: str
    entity: str
    version: int
    values: dict[str, PyValue]
    relationships: dict[str, list[str]]

    def __getitem__(self, key: str) -> PyValue:
        return self.values[key]

    @staticmethod
    def of(m: ob.ManagedObject) -> "Object":
        return Object(m.object_id, m.entity, m.version, from_values(m.values),
                      {k: list(v.object_ids) for k, v in m.relationships.items()})


@dataclass(frozen=True)
class FetchResult:
    """A fetch's answer; which list is filled depends on the result type. `token` is the generation read."""

    token: bytes
    objects: list[Object]
    object_ids: list[str]
    rows: list[dict[str, PyValue]]
    count: int

    @staticmethod
    def of(r: ob.FetchResults) -> "FetchResult":
        return FetchResult(r.token, [Object.of(o) for o in r.objects], list(r.object_ids),
                           [from_values(row.values) for row in r.rows], r.count)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.objects)

    def __len__(self) -> int:
        return len(self.objects)


@dataclass(frozen=True)
class SaveResult:
    """What a save did: new token and generation, permanent IDs for temporary ones, resolved conflicts."""

    token: bytes
    generation: int
    permanent_ids: dict[str, str]
    versions: dict[str, int]
    resolved_conflicts: list[Conflict]
    skipped_object_ids: list[str]
    # True when the server returned the stored outcome of an earlier attempt with the same
    # client transaction ID: the save was applied once, by that attempt.
    replayed: bool
    client_transaction_id: str
    raw: ob.SaveResult = field(repr=False)

    @staticmethod
    def of(r: ob.SaveResult, txid: str) -> "SaveResult":
        return SaveResult(r.token, r.generation, dict(r.permanent_ids), dict(r.versions),
                          [Conflict.of(c) for c in r.resolved_conflicts], list(r.skipped_object_ids),
                          r.replayed, txid, r)


SortKey = str | tuple[str, bool]


def fetch_spec(entity: str, predicate: str = "", arguments: Mapping[str, object] | None = None,
               sort: Sequence[SortKey] = (), limit: int = 0, offset: int = 0,
               result_type: ResultType = ResultType.OBJECTS,
               properties: Iterable[str] = ()) -> ob.FetchSpec:
    """A FetchSpec. `sort` items are key paths ("age"), a leading "-" for descending ("-age"), or
    (key_path, descending) pairs; `arguments` bind `$name` variables of the predicate."""
    sorts = []
    for s in sort:
        if isinstance(s, tuple):
            sorts.append(ob.SortDescriptor(key_path=s[0], descending=s[1]))
        else:
            desc = s.startswith("-")
            sorts.append(ob.SortDescriptor(key_path=s.lstrip("-"), descending=desc))
    return ob.FetchSpec(entity=entity, predicate=predicate,
                        variables={k: to_argument(x) for k, x in (arguments or {}).items()},
                        sort_descriptors=sorts, fetch_limit=limit, fetch_offset=offset,
                        result_type=result_type.value, properties_to_fetch=list(properties))
