"""The operator's account calls (`ubiquity.v1.Accounts`, docs/accounts.md): accounts, their API
keys, archive / restore / delete.

Every one needs the operator key (the key ubiquityd writes to `<data-dir>/operator.key`): make the
client with `operator_key=`; with a session or without credentials they raise
`UnauthenticatedError` (BAD_CREDENTIALS / MISSING_CREDENTIALS). `client.accounts` on either client (`AsyncAccounts` awaited).
Signing in with a key made here is `Client(target, api_key=created.secret, device_id=...)`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ubiquity.v1 import accounts_pb2 as ac

from ._calls import AsyncCaller, Caller, Unary
from .session import TRANSITION_SECONDS
from .events import _ProtoEnum


def _time(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1e6, timezone.utc)


class AccountState(_ProtoEnum):
    """Where an account is in its lifecycle (docs/accounts.md "Archive, restore, delete")."""

    UNSPECIFIED = ac.ACCOUNT_STATE_UNSPECIFIED
    ACTIVE = ac.ACCOUNT_STATE_ACTIVE
    ARCHIVED = ac.ACCOUNT_STATE_ARCHIVED      # kept, served to nobody until restored
    DELETING = ac.ACCOUNT_STATE_DELETING      # a deletion a restart finishes
    ARCHIVING = ac.ACCOUNT_STATE_ARCHIVING
    RESTORING = ac.ACCOUNT_STATE_RESTORING


class ApiKeyScope(_ProtoEnum):
    """What a key's sessions may do; exceeding it is `PermissionDeniedError` SCOPE_EXCEEDED."""

    UNSPECIFIED = ac.API_KEY_SCOPE_UNSPECIFIED
    READ_WRITE = ac.API_KEY_SCOPE_READ_WRITE
    READ_ONLY = ac.API_KEY_SCOPE_READ_ONLY    # only calls that change nothing stored
    ONE_STORE = ac.API_KEY_SCOPE_ONE_STORE    # read-write on the store named `store_name` only


@dataclass(frozen=True)
class Account:
    account_id: str
    display_name: str
    state: AccountState
    created_at: datetime

    @staticmethod
    def of(a: ac.Account) -> "Account":
        return Account(a.account_id, a.display_name, AccountState(a.state), _time(a.created_at_micros))


@dataclass(frozen=True)
class ApiKey:
    key_id: str          # what `revoke_api_key` takes
    account_id: str
    scope: ApiKeyScope
    store_name: str      # ONE_STORE's store; "" otherwise
    label: str
    created_at: datetime
    revoked: bool

    @staticmethod
    def of(k: ac.ApiKey) -> "ApiKey":
        return ApiKey(k.key_id, k.account_id, ApiKeyScope(k.scope), k.store_name, k.label,
                      _time(k.created_at_micros), k.revoked)


@dataclass(frozen=True)
class CreatedApiKey:
    key: ApiKey
    # the key to sign in with, shown here and nowhere else (kept out of repr: logs print results)
    secret: str = field(repr=False)


@dataclass(frozen=True)
class DeletedAccount:
    """The receipt of `delete_account`: what was removed."""

    stores_removed: int
    archived_stores_removed: int
    key_value_entries_removed: int
    api_keys_removed: int          # revoked ones included
    sessions_removed: int
    bytes_removed: int

    @staticmethod
    def of(r: ac.DeleteAccountResponse) -> "DeletedAccount":
        return DeletedAccount(r.stores_removed, r.archived_stores_removed, r.key_value_entries_removed,
                              r.api_keys_removed, r.sessions_removed, r.bytes_removed)


def create_account(display_name: str) -> Unary[Account]:
    return Unary("accounts", "CreateAccount", ac.CreateAccountRequest(display_name=display_name), Account.of)


def get_account(account_id: str) -> Unary[Account]:
    return Unary("accounts", "GetAccount", ac.GetAccountRequest(account_id=account_id), Account.of)


def list_accounts_page(page_size: int, page_token: str) -> Unary[tuple[list[Account], str]]:
    """One page of ListAccounts and the next page's token ("" after the last page)."""
    return Unary("accounts", "ListAccounts", ac.ListAccountsRequest(page_size=page_size, page_token=page_token),
                 lambda r: ([Account.of(a) for a in r.accounts], r.next_page_token))


def create_api_key(account_id: str, scope: ApiKeyScope, store_name: str, label: str) -> Unary[CreatedApiKey]:
    if (scope is ApiKeyScope.ONE_STORE) != bool(store_name):
        raise ValueError("store_name goes with scope=ApiKeyScope.ONE_STORE, and only with it")
    return Unary("accounts", "CreateApiKey", ac.CreateApiKeyRequest(
        account_id=account_id, scope=scope.value, store_name=store_name, label=label),
        lambda r: CreatedApiKey(ApiKey.of(r.key), r.secret))


def revoke_api_key(key_id: str) -> Unary[int]:
    return Unary("accounts", "RevokeApiKey", ac.RevokeApiKeyRequest(key_id=key_id), lambda r: r.sessions_revoked)


def archive_account(account_id: str) -> Unary[Account]:
    return Unary("accounts", "ArchiveAccount", ac.ArchiveAccountRequest(account_id=account_id), Account.of, at_least=TRANSITION_SECONDS)


def restore_account(account_id: str) -> Unary[Account]:
    return Unary("accounts", "RestoreAccount", ac.RestoreAccountRequest(account_id=account_id), Account.of)


def delete_account(account_id: str) -> Unary[DeletedAccount]:
    return Unary("accounts", "DeleteAccount", ac.DeleteAccountRequest(account_id=account_id), DeletedAccount.of, at_least=TRANSITION_SECONDS)


class Accounts:
    """`client.accounts`: the operator's account calls, answered as typed values."""

    def __init__(self, calls: Caller) -> None:
        self._calls = calls

    def create_account(self, display_name: str = "") -> Account:
        """A new, ACTIVE account with a server-made ID."""
        return self._calls.run(create_account(display_name))

    def get_account(self, account_id: str) -> Account:
        """`NotFoundError` if there is none (or it is being deleted)."""
        return self._calls.run(get_account(account_id))

    def list_accounts(self, *, page_size: int = 0) -> Iterator[Account]:
        """Every account, by ID, fetched a page at a time as the iterator goes (`page_size` 0: the
        server's default, 100; at most 1,000). The first page is fetched here, not at the first
        `next`: errors such as a missing operator key raise at once."""
        first = self._calls.run(list_accounts_page(page_size, ""))

        def pages(page: tuple[list[Account], str]) -> Iterator[Account]:
            while True:
                accounts, token = page
                yield from accounts
                if not token:
                    return
                page = self._calls.run(list_accounts_page(page_size, token))

        return pages(first)

    def create_api_key(self, account_id: str, scope: ApiKeyScope = ApiKeyScope.READ_WRITE, *,
                       store_name: str = "", label: str = "") -> CreatedApiKey:
        """A new key of the account; keep `.secret`, shown only here. `store_name` with
        `ApiKeyScope.ONE_STORE` only (ValueError otherwise, before any call)."""
        return self._calls.run(create_api_key(account_id, scope, store_name, label))

    def revoke_api_key(self, key_id: str) -> int:
        """Revokes the key and ends every session signed in with it; how many it ended."""
        return self._calls.run(revoke_api_key(key_id))

    def archive_account(self, account_id: str) -> Account:
        """Ends its sessions and archives its stores (its devices get WILL_CHANGE / DID_CHANGE
        ACCOUNT_REMOVED, docs/lifecycle.md); returns it ARCHIVED. `FailedPreconditionError`
        ACCOUNT_ARCHIVED / ACCOUNT_BUSY / DEFAULT_ACCOUNT."""
        return self._calls.run(archive_account(account_id))

    def restore_account(self, account_id: str) -> Account:
        """Brings an archived account back unchanged; its keys sign in again; returns it ACTIVE.
        `AlreadyExistsError` ACCOUNT_NOT_ARCHIVED for an active one."""
        return self._calls.run(restore_account(account_id))

    def delete_account(self, account_id: str) -> DeletedAccount:
        """Removes the account and everything of it (crash-safe); the receipt of what went."""
        return self._calls.run(delete_account(account_id))


class AsyncAccounts:
    """`Accounts` for `ubiquity.aio.Client`: the same calls, awaited (`list_accounts` is an async
    iterator)."""

    def __init__(self, calls: AsyncCaller) -> None:
        self._calls = calls

    async def create_account(self, display_name: str = "") -> Account:
        return await self._calls.run(create_account(display_name))

    async def get_account(self, account_id: str) -> Account:
        return await self._calls.run(get_account(account_id))

    async def list_accounts(self, *, page_size: int = 0) -> AsyncIterator[Account]:
        token = ""
        while True:
            accounts, token = await self._calls.run(list_accounts_page(page_size, token))
            for account in accounts:
                yield account
            if not token:
                return

    async def create_api_key(self, account_id: str, scope: ApiKeyScope = ApiKeyScope.READ_WRITE, *,
                             store_name: str = "", label: str = "") -> CreatedApiKey:
        return await self._calls.run(create_api_key(account_id, scope, store_name, label))

    async def revoke_api_key(self, key_id: str) -> int:
        return await self._calls.run(revoke_api_key(key_id))

    async def archive_account(self, account_id: str) -> Account:
        return await self._calls.run(archive_account(account_id))

    async def restore_account(self, account_id: str) -> Account:
        return await self._calls.run(restore_account(account_id))

    async def delete_account(self, account_id: str) -> DeletedAccount:
        return await self._calls.run(delete_account(account_id))


__all__ = ["Accounts", "AsyncAccounts", "Account", "AccountState", "ApiKey", "ApiKeyScope", "CreatedApiKey",
           "DeletedAccount"]
