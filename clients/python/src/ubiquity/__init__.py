"""Python client for Ubiquity: `Client(target).open_store(name)` → fetch, contexts, saves, change feed.

See clients/python/README.md. The generated protobuf modules are in `ubiquity.v1`.
"""

from .accounts import Account, Accounts, AccountState, ApiKey, ApiKeyScope, AsyncAccounts, CreatedApiKey, DeletedAccount
from .admin import Admin, AsyncAdmin, BackupManifest, Pong, RestoredStore, ServerInfo, ServerStats
from .client import Client, Store
from .context import Context, ContextState, Generation
from .errors import (AlreadyExistsError, CancelledError, Conflict, ConflictError, ConstraintError, DeadlineExceededError,
                     FailedPreconditionError, GenerationExpiredError, HistoryExpired, InvalidArgumentError,
                     KeyValueConflictError, KeyValueQuotaError, NotFoundError, PermissionDeniedError,
                     ResourceExhaustedError, UbiquityError, UnauthenticatedError, UnavailableError, Violation,
                     from_rpc_error)
from .events import Acknowledgement, ImportCounts, KeyValueChange, KeyValueChangeReason, Phase, StoreEvent, Transition
from .feed import Change, ChangeFeed, FeedEvent, Start, Transaction
from .keyvalue import AsyncKeyValues, KeyValues
from .live import LiveQuery, LiveQueryObject, LiveQueryUpdate
from .model import FetchResult, MergePolicy, Object, ResultType, SaveResult, StoreInfo
from .results import (BaselineChunk, BatchResult, DeduplicateResult, DeletedObject, DeletionsPage, DuplicateGroup,
                      HistoryPage, ImportResult, KeyValueEntry, KeyValuePage, KeyValueUsage, KeyValueWrite, SeedResult)
from .session import SignedIn
from .tls import TLS
from .values import PyValue, Typed, ValueLike

__all__ = [
    "Client", "Store", "StoreInfo", "Context", "ContextState", "Generation",
    "UbiquityError", "InvalidArgumentError", "NotFoundError", "FailedPreconditionError",
    "GenerationExpiredError", "HistoryExpired", "ConflictError", "ConstraintError", "UnavailableError",
    "ResourceExhaustedError", "DeadlineExceededError", "CancelledError", "Conflict", "Violation",
    "from_rpc_error", "ChangeFeed", "FeedEvent", "Transaction", "Change", "Start",
    "FetchResult", "MergePolicy", "Object", "ResultType", "SaveResult", "PyValue", "Typed", "ValueLike",
    "KeyValueConflictError", "KeyValueQuotaError", "KeyValues", "AsyncKeyValues", "BaselineChunk", "BatchResult",
    "DeduplicateResult", "DuplicateGroup", "ImportResult", "KeyValueEntry", "KeyValuePage", "KeyValueUsage",
    "KeyValueWrite", "SeedResult", "TLS", "HistoryPage", "DeletionsPage", "DeletedObject",
    "UnauthenticatedError", "PermissionDeniedError", "StoreEvent", "Phase", "Transition", "ImportCounts", "Acknowledgement",
    "KeyValueChange", "KeyValueChangeReason", "SignedIn", "Admin", "AsyncAdmin", "Pong", "ServerInfo",
    "ServerStats", "BackupManifest", "RestoredStore", "AlreadyExistsError", "Accounts", "AsyncAccounts", "Account",
    "AccountState", "ApiKey", "ApiKeyScope", "CreatedApiKey", "DeletedAccount", "LiveQuery", "LiveQueryObject",
    "LiveQueryUpdate",
]
