"""Typed answers of the Stores calls beyond fetch and save: batches, deduplication, seeds,
baselines, imports (plain views of the `ubiquity.v1.stores_pb2` messages)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import keyvalue_pb2 as kv
from ubiquity.v1 import stores_pb2 as st

from .feed import Transaction, transaction_of
from .model import Object


@dataclass(frozen=True)
class BatchResult:
    """What a BatchInsert / BatchUpdate / BatchDelete did: one transaction at `token`."""

    token: bytes
    count: int
    object_ids: list[str]  # BatchInsert with return_object_ids: the new objects' IDs, in order

    @staticmethod
    def of(r: st.BatchResponse) -> "BatchResult":
        return BatchResult(r.token, r.count, list(r.object_ids))


@dataclass(frozen=True)
class DuplicateGroup:
    winner: str
    removed: list[str]


@dataclass(frozen=True)
class DeduplicateResult:
    """Duplicates by a unique key: `groups` sets of duplicates, `removed` objects deleted."""

    token: bytes
    groups: int
    removed: int
    details: list[DuplicateGroup]

    @staticmethod
    def of(r: st.DeduplicateResponse) -> "DeduplicateResult":
        return DeduplicateResult(r.token, r.groups, r.removed,
                                 [DuplicateGroup(g.winner_object_id, list(g.removed_object_ids)) for g in r.details])


@dataclass(frozen=True)
class SeedResult:
    """A seed: `applied` is False when this seed ID had been applied before (nothing changed then);
    `permanent_ids` maps the inserts' temporary IDs as first applied."""

    token: bytes
    applied: bool
    permanent_ids: dict[str, str]

    @staticmethod
    def of(r: st.SeedResponse) -> "SeedResult":
        return SeedResult(r.token, r.applied, dict(r.permanent_ids))


@dataclass(frozen=True)
class BaselineChunk:
    """One chunk of ExportBaseline; every chunk has the snapshot's token, the last has `last`
    (and `total`). Subscribe from `token` to follow later changes with no gap."""

    token: bytes
    model_version_hash: str
    objects: list[Object]
    last: bool
    total: int

    @staticmethod
    def of(r: st.BaselineChunk) -> "BaselineChunk":
        return BaselineChunk(r.token, r.model_version_hash, [Object.of(o) for o in r.objects], r.last, r.total)


@dataclass(frozen=True)
class ImportResult:
    """ImportStore: `imported` objects; `object_id_map` source ID → new ID."""

    token: bytes
    imported: int
    object_id_map: dict[str, str]

    @staticmethod
    def of(r: st.ImportStoreResponse) -> "ImportResult":
        return ImportResult(r.token, r.imported, dict(r.object_id_map))


@dataclass(frozen=True)
class HistoryPage:
    """A page of committed transactions (Changes.FetchHistory), oldest first. While `has_more`,
    ask again from `next_token` (it advances past transactions the filter left out too)."""

    transactions: list[Transaction]
    next_token: bytes
    has_more: bool
    current_token: bytes

    @staticmethod
    def of(r: ch.FetchHistoryResponse) -> "HistoryPage":
        return HistoryPage([transaction_of(t) for t in r.transactions], r.next_token, r.has_more, r.current_token)


@dataclass(frozen=True)
class DeletedObject:
    object_id: str
    entity: str
    generation: int  # of the transaction that deleted it


@dataclass(frozen=True)
class DeletionsPage:
    """A page of the tombstone index (Changes.FetchDeletions), which outlives the full history:
    after HistoryExpired with `deletions_available`, what a cache drops. Go on from `next_token`
    (unchanged) while `has_more`."""

    deletions: list[DeletedObject]
    next_token: bytes
    has_more: bool
    current_token: bytes

    @staticmethod
    def of(r: ch.FetchDeletionsResponse) -> "DeletionsPage":
        return DeletionsPage([DeletedObject(d.object_id, d.entity, d.generation) for d in r.deletions],
                             r.next_token, r.has_more, r.current_token)


@dataclass(frozen=True)
class KeyValueEntry:
    key: str
    value: bytes  # empty in a keys_only list
    version: int
    update_time: datetime
    author: str
    value_size: int

    @staticmethod
    def of(e: kv.KeyValueEntry) -> "KeyValueEntry":
        return KeyValueEntry(e.key, e.value, e.version, e.update_time.ToDatetime(tzinfo=timezone.utc),
                             e.author, e.value_size)


@dataclass(frozen=True)
class KeyValueWrite:
    """A Set or Delete: the key's version after it, the account's key-value feed position, and
    (Delete) whether the key existed."""

    version: int
    feed_token: bytes
    existed: bool

    @staticmethod
    def of(r: kv.KeyValueWriteResponse) -> "KeyValueWrite":
        return KeyValueWrite(r.version, r.feed_token, r.existed)


@dataclass(frozen=True)
class KeyValueUsage:
    keys: int
    bytes: int
    max_keys: int
    max_bytes: int
    max_key_bytes: int
    max_value_bytes: int


@dataclass(frozen=True)
class KeyValuePage:
    """One page of List: pass `next_page_token` for the next (empty: this was the last)."""

    entries: list[KeyValueEntry]
    next_page_token: bytes
    feed_token: bytes
    usage: KeyValueUsage

    @staticmethod
    def of(r: kv.KeyValueListResponse) -> "KeyValuePage":
        u = r.usage
        return KeyValuePage([KeyValueEntry.of(e) for e in r.entries], r.next_page_token, r.feed_token,
                            KeyValueUsage(u.keys, u.bytes, u.max_keys, u.max_bytes, u.max_key_bytes,
                                          u.max_value_bytes))
