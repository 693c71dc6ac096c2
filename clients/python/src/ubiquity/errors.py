"""Typed exceptions for failed calls, decoded from the `grpc-status-details-bin` trailer.

Every failure of the server's data services carries a `google.rpc.Status` whose details hold an
`ErrorInfo` (the stable `reason` of docs/errors.md), for bad arguments a `BadRequest`, for conflicts
`ubiquity.v1.ConflictDetails`, for an expired history `HistoryExpiredDetails`, for an ended feed
`ResumeDetails`. The exception class is chosen from the reason (then the status code); nothing is
parsed from the message, which is for people.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import keyvalue_pb2 as kv
from ubiquity.v1 import objects_pb2 as ob

from .values import PyValue, from_values

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class Conflict:
    """One object a save could not apply as asked (a decoded `ubiquity.v1.ConflictRecord`)."""

    kind: str  # "version_changed", "deleted_in_store", "uniqueness_clash"
    object_id: str
    temporary_id: str
    entity: str
    client_snapshot: dict[str, PyValue]
    client_changes: dict[str, PyValue]
    store_values: dict[str, PyValue]
    client_version: int
    store_version: int
    constraint: list[str]
    record: ob.ConflictRecord = field(repr=False)

    @staticmethod
    def of(record: ob.ConflictRecord) -> "Conflict":
        name = ob.ConflictRecord.Kind.Name(record.kind)
        return Conflict(
            kind=name.removeprefix("KIND_").lower(),
            object_id=record.object_id, temporary_id=record.temporary_id, entity=record.entity,
            client_snapshot=from_values(record.client_snapshot),
            client_changes=from_values(record.client_changes),
            store_values=from_values(record.store_values),
            client_version=record.client_version, store_version=record.store_version,
            constraint=list(record.constraint), record=record)


@dataclass(frozen=True)
class Violation:
    """One `google.rpc.BadRequest` field violation: the request field and what is wrong with it."""

    field: str
    description: str
    reason: str


class UbiquityError(Exception):
    """A call that ended with a non-OK status. `reason` is ErrorInfo.reason (docs/errors.md)."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str | None,
                 metadata: dict[str, str], details: list[any_pb2.Any]) -> None:
        super().__init__(f"{code.name}: {message}" + (f" [{reason}]" if reason else ""))
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = metadata
        self.details = details
        self.violations: list[Violation] = []
        br = self._unpack(error_details_pb2.BadRequest())
        if br is not None:
            self.violations = [Violation(v.field, v.description, v.reason) for v in br.field_violations]

    def _unpack(self, msg: M) -> M | None:
        """The first detail of msg's type, unpacked into msg (Any.Unpack checks the type)."""
        for d in self.details:
            if d.Unpack(msg):
                return msg
        return None


class InvalidArgumentError(UbiquityError):
    """The request was wrong (INVALID_ARGUMENT); `violations` names the fields."""


class NotFoundError(UbiquityError):
    """No such store, context or object (NOT_FOUND)."""


class FailedPreconditionError(UbiquityError):
    """The store is not in a state for this call (FAILED_PRECONDITION): no model, an expired token, …"""


class GenerationExpiredError(FailedPreconditionError):
    """GENERATION_EXPIRED / STORE_REPLACED: the token can no longer be read; read at current."""


class HistoryExpired(FailedPreconditionError):
    """HISTORY_EXPIRED: the change history was trimmed past the token.

    Re-baseline: fetch at `current_token`, then subscribe from it. With `deletions_available`, a
    cache can instead drop the IDs `Changes.FetchDeletions` lists after its token (docs/changes.md).
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        info = self._unpack(ch.HistoryExpiredDetails()) or ch.HistoryExpiredDetails()
        self.oldest_retained_token: bytes = info.oldest_retained_token
        self.current_token: bytes = info.current_token
        self.deletions_available: bool = info.deletions_available


class ConflictError(UbiquityError):
    """MERGE_CONFLICT (ABORTED): nothing was applied; `conflicts` are the decoded records."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        info = self._unpack(ob.ConflictDetails()) or ob.ConflictDetails()
        self.conflicts: list[Conflict] = [Conflict.of(r) for r in info.conflicts]
        # The trailer is bounded: when `truncated`, save with conflicts_in_response for every record.
        self.truncated: bool = info.truncated
        self.total_conflicts: int = info.total_conflicts


class ConstraintError(ConflictError):
    """CONSTRAINT_CONFLICT: a uniqueness constraint clashed under the error policy."""


class UnavailableError(UbiquityError):
    """UNAVAILABLE: busy, shutting down, generation not reached — safe to retry."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        d = self._unpack(ch.ResumeDetails())
        # Set when a Subscribe ended with the server's drain: resume from here.
        self.resume_token: bytes | None = d.resume_token if d is not None else None


class ResourceExhaustedError(UbiquityError):
    """RESOURCE_EXHAUSTED: a limit, a full disk, or a subscriber that fell too far behind."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        d = self._unpack(ch.ResumeDetails())
        self.resume_token: bytes | None = d.resume_token if d is not None else None


class KeyValueConflictError(UbiquityError):
    """KEY_VERSION_CONFLICT (ABORTED): a key-value write's precondition did not hold; nothing changed.
    `current_version` and `exists` are the key's state then: reapply your change and retry with it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        d = self._unpack(kv.KeyValueConflictDetails()) or kv.KeyValueConflictDetails()
        self.key: str = d.key
        self.exists: bool = d.exists
        self.current_version: int = d.current_version


class KeyValueQuotaError(ResourceExhaustedError):
    """KEY_VALUE_QUOTA: a key-value write over a quota; nothing changed. `quota` is "keys",
    "account_bytes", "key_bytes" or "value_bytes"; `limit`, `requested`, `used` as the server said."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        d = self._unpack(kv.KeyValueQuotaDetails()) or kv.KeyValueQuotaDetails()
        self.quota: str = kv.KeyValueQuotaDetails.Quota.Name(d.quota).removeprefix("QUOTA_").lower()
        self.limit: int = d.limit
        self.requested: int = d.requested
        self.used: int = d.used


class DeadlineExceededError(UbiquityError):
    """The call's deadline passed; for a save, retry with the same client transaction ID."""


class CancelledError(UbiquityError):
    """The call was cancelled."""


class UnauthenticatedError(UbiquityError):
    """No session, or a bad, expired or revoked one (`reason`: MISSING_CREDENTIALS,
    BAD_CREDENTIALS, SESSION_EXPIRED, SESSION_REVOKED); an operator call without the operator key."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        d = self._unpack(ch.ResumeDetails())
        # A feed ended by its session's end (a sign-out: after the DID_CHANGE): resume from here.
        self.resume_token: bytes | None = d.resume_token if d is not None else None


class PermissionDeniedError(UbiquityError):
    """The credentials are valid but not allowed this (a read-only key's write: SCOPE_EXCEEDED;
    an operator call with a session)."""


class AlreadyExistsError(UbiquityError):
    """What the call would create or restore is there already (RestoreAccount of an active
    account: ACCOUNT_NOT_ARCHIVED)."""


_BY_REASON: dict[str, type[UbiquityError]] = {
    "MERGE_CONFLICT": ConflictError,
    "CONSTRAINT_CONFLICT": ConstraintError,
    "HISTORY_EXPIRED": HistoryExpired,
    "GENERATION_EXPIRED": GenerationExpiredError,
    "STORE_REPLACED": GenerationExpiredError,
    "KEY_VERSION_CONFLICT": KeyValueConflictError,
    "KEY_VALUE_QUOTA": KeyValueQuotaError,
}

_BY_CODE: dict[grpc.StatusCode, type[UbiquityError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ABORTED: ConflictError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.CANCELLED: CancelledError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
}

_DETAILS_KEY = "grpc-status-details-bin"


def from_rpc_error(err: grpc.RpcError) -> UbiquityError:
    """The typed exception for a failed grpcio call (sync or aio)."""
    code: grpc.StatusCode = err.code()
    message: str = err.details() or ""
    trailers = err.trailing_metadata() or ()
    return from_status(code, message, trailers)


def from_status(code: grpc.StatusCode, message: str, trailers: object) -> UbiquityError:
    details: list[any_pb2.Any] = []
    reason: str | None = None
    metadata: dict[str, str] = {}
    for key, value in trailers:  # type: ignore[attr-defined]
        if key == _DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            details = list(status.details)
    for d in details:
        info = error_details_pb2.ErrorInfo()
        if d.Unpack(info):
            reason = info.reason
            metadata = dict(info.metadata)
    cls = (_BY_REASON.get(reason) if reason else None) or _BY_CODE.get(code, UbiquityError)
    return cls(code, message, reason, metadata, details)
