"""Typed views of the feed's non-transaction events: store transitions (`StoreEvent`,
docs/lifecycle.md in the repository) and key-value changes (`KeyValueChange`, docs/keyvalue.md).

Plain values converted from the `ubiquity.v1.changes_pb2` messages, so a caller matches on enums
instead of proto integers, and both clients (sync and asyncio) share them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ubiquity.v1 import changes_pb2 as ch


class _ProtoEnum(enum.Enum):
    """An enum over a proto enum: a value a newer server sends and this client does not know
    reads as the zero member ("unspecified"), not as an error in the middle of a feed."""

    @classmethod
    def _missing_(cls, value: object) -> "_ProtoEnum":
        return cls(0)


class Phase(_ProtoEnum):
    """Before or after a transition (Core Data's StoresWillChange / StoresDidChange)."""

    # Never sent (read for a value this client does not know).
    UNSPECIFIED = ch.StoreEvent.PHASE_UNSPECIFIED
    WILL_CHANGE = ch.StoreEvent.PHASE_WILL_CHANGE
    DID_CHANGE = ch.StoreEvent.PHASE_DID_CHANGE


class Transition(_ProtoEnum):
    """Why the store changes (NSPersistentStoreUbiquitousTransitionType)."""

    # No transition: the state as a subscription starts (a local session's first event is
    # DID_CHANGE / NONE with using_local_storage).
    NONE = ch.StoreEvent.TRANSITION_UNSPECIFIED
    # The device signed in to an account.
    ACCOUNT_ADDED = ch.StoreEvent.TRANSITION_ACCOUNT_ADDED
    # The device signed out or switched account.
    ACCOUNT_REMOVED = ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED
    # The account's content was deleted: no DID_CHANGE follows, the stream ends SESSION_REVOKED.
    CONTENT_REMOVED = ch.StoreEvent.TRANSITION_CONTENT_REMOVED
    # The device's local stores were imported into the account's stores on first sign-in.
    INITIAL_IMPORT_COMPLETED = ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED


@dataclass(frozen=True)
class ImportCounts:
    """What a first-sign-in import did; the first three add up to the number of local objects,
    the last two to the number of local key-value entries."""

    inserted: int      # objects inserted into the account's store
    merged: int        # merged into existing objects through uniqueness constraints
    deduplicated: int  # duplicates among the local objects removed
    key_values_moved: int = 0  # local key-value entries set in the account
    key_values_kept: int = 0   # local entries of keys the account had: the account's value kept

    @staticmethod
    def of(c: ch.ImportCounts) -> "ImportCounts":
        return ImportCounts(c.inserted, c.merged, c.deduplicated, c.key_values_moved, c.key_values_kept)


@dataclass(frozen=True)
class StoreEvent:
    """A store transition, announced before (`Phase.WILL_CHANGE`: save what you need) and after
    (`Phase.DID_CHANGE`: drop your contexts, re-read) it happens. `token`/`generation` are the
    event's place in the store's history (resuming from an older token replays it)."""

    phase: Phase
    transition: Transition
    using_local_storage: bool           # whether the device works in its local store (now)
    import_counts: ImportCounts | None  # DID_CHANGE of INITIAL_IMPORT_COMPLETED: what the import did
    token: bytes
    generation: int
    # DID_CHANGE only: the transition did not happen (it failed, or a killed server's restart
    # closed it); the store is as it was before the WILL_CHANGE.
    cancelled: bool = False
    # WILL_CHANGE to a feed opened with `acknowledges_store_events=True`: acknowledge it with
    # `Store.acknowledge_store_event` once pending work is flushed.
    acknowledgement: "Acknowledgement | None" = None

    @staticmethod
    def of(e: ch.StoreEvent, token: bytes, generation: int, authorization: str = "") -> "StoreEvent":
        """`authorization`: what the stream that received it sent (its acknowledgement's)."""
        counts = ImportCounts.of(e.import_counts) if e.HasField("import_counts") else None
        ack = Acknowledgement.of(e.acknowledgement, authorization) if e.HasField("acknowledgement") else None
        return StoreEvent(Phase(e.phase), Transition(e.transition), e.using_local_storage, counts, token, generation,
                          e.cancelled, ack)


@dataclass(frozen=True)
class Acknowledgement:
    """What a WILL_CHANGE asks of a subscriber that opted in: the transition waits (until
    `deadline`, after which the server goes on without it) for `Store.acknowledge_store_event`."""

    event_token: bytes
    deadline: datetime  # UTC; in the past on a replayed event (acknowledging is then a no-op)
    # The `authorization` the receiving stream sent: the server counts an acknowledgement for the
    # subscriptions of the session that sends it, so it goes with this one, not the client's current
    # session (a renewal may have replaced it; a sign-out in flight is ending it).
    authorization: str = field(default="", repr=False, compare=False)

    @staticmethod
    def of(a: ch.StoreEventAcknowledgement, authorization: str = "") -> "Acknowledgement":
        deadline = datetime.fromtimestamp(a.deadline.seconds + a.deadline.nanos / 1e9, tz=timezone.utc)
        return Acknowledgement(a.event_token, deadline, authorization)


class KeyValueChangeReason(_ProtoEnum):
    """Why a key changed (NSUbiquitousKeyValueStoreChangeReasonKey)."""

    UNSPECIFIED = ch.KeyValueChange.REASON_UNSPECIFIED
    # A device set or deleted the key (live changes, and changes after a resume token).
    SERVER_CHANGE = ch.KeyValueChange.REASON_SERVER_CHANGE
    # The first sync of the account's values (a feed started at "oldest").
    INITIAL_SYNC = ch.KeyValueChange.REASON_INITIAL_SYNC
    # A notice, not a change (nothing stored, the token does not move): a Set of `key` by
    # `author` was refused for a quota (the writer got KeyValueQuotaError); with `key` empty, the
    # account is over a quota (sent once before caught_up). value/version/deleted are unset.
    QUOTA_VIOLATION = ch.KeyValueChange.REASON_QUOTA_VIOLATION
    # The key was moved in from a device's local key-value entries at its first sign-in.
    ACCOUNT_CHANGE = ch.KeyValueChange.REASON_ACCOUNT_CHANGE


@dataclass(frozen=True)
class KeyValueChange:
    """One change to the account's key-value store; a key changed several times since a feed's
    token arrives once, in its latest state. `token` resumes a key-value feed after it."""

    reason: KeyValueChangeReason
    key: str
    value: bytes   # empty when `deleted`
    version: int   # the key's version after the change (for compare-and-set)
    deleted: bool
    author: str
    token: bytes
    sequence: int  # the account's key-value change number (the response's resume_generation)

    @staticmethod
    def of(c: ch.KeyValueChange, token: bytes, sequence: int) -> "KeyValueChange":
        return KeyValueChange(KeyValueChangeReason(c.reason), c.key, c.value, c.version, c.deleted, c.author,
                              token, sequence)


__all__ = ["Phase", "Transition", "ImportCounts", "StoreEvent", "KeyValueChangeReason", "KeyValueChange"]
