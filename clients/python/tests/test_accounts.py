"""The operator's account calls (`client.accounts`) against a real ubiquityd: an account and its
scoped keys, a session of each, the scope refusing a write as a typed error, revocation, and the
archive / restore / delete flows — sync and asyncio."""

from __future__ import annotations

import asyncio

import grpc
import pytest

import ubiq_harness
import ubiquity
import ubiquity.aio
from conftest import person_model
from ubiquity import AccountState, ApiKeyScope


def operator(server: ubiq_harness.Ubiquityd) -> ubiquity.Client:
    return ubiquity.Client(server.address, timeout=30, operator_key=server.operator_key)


def test_an_account_with_scoped_keys_signs_in_and_its_scopes_hold(server: ubiq_harness.Ubiquityd) -> None:
    with operator(server) as op:
        account = op.accounts.create_account("Ann's phone")
        assert (account.display_name, account.state) == ("Ann's phone", AccountState.ACTIVE)
        assert op.accounts.get_account(account.account_id) == account
        assert account.account_id in [a.account_id for a in op.accounts.list_accounts()]
        # one account a page: the iterator follows the pages to the end, in ID order
        paged = [a.account_id for a in op.accounts.list_accounts(page_size=1)]
        assert paged == sorted(paged) and account.account_id in paged and "default" in paged

        full = op.accounts.create_api_key(account.account_id, label="app")
        assert (full.key.account_id, full.key.scope, full.key.revoked) == (account.account_id, ApiKeyScope.READ_WRITE, False)
        assert full.secret and full.secret not in repr(full)
        with ubiquity.Client(server.address, api_key=full.secret, device_id="d1") as c:
            assert c.sign_in().account_id == account.account_id
            notes = c.open_store("notes")
            notes.register_model(person_model())
            notes.save(inserts={"a": ("Person", {"name": "Ann"})})
            c.open_store("other")

        reader = op.accounts.create_api_key(account.account_id, ApiKeyScope.READ_ONLY)
        with ubiquity.Client(server.address, api_key=reader.secret, device_id="d2") as c:
            store = c.open_store("notes", must_exist=True)
            assert store.fetch("Person").count == 1  # reads pass
            with pytest.raises(ubiquity.PermissionDeniedError) as denied:
                store.save(inserts={"b": ("Person", {"name": "Bob"})})
            assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED and denied.value.reason == "SCOPE_EXCEEDED"
            assert store.fetch("Person").count == 1  # the refused write changed nothing

        one = op.accounts.create_api_key(account.account_id, ApiKeyScope.ONE_STORE, store_name="notes")
        assert (one.key.scope, one.key.store_name) == (ApiKeyScope.ONE_STORE, "notes")
        with ubiquity.Client(server.address, api_key=one.secret, device_id="d3") as c:
            assert [s.name for s in c.list_stores()] == ["notes"]  # the other store is not its
            with pytest.raises(ubiquity.PermissionDeniedError) as denied:
                c.open_store("other", must_exist=True)
            assert denied.value.reason == "SCOPE_EXCEEDED"
            signed_in = ubiquity.Client(server.address, api_key=one.secret, device_id="d4")
            signed_in.list_stores()
            assert op.accounts.revoke_api_key(one.key.key_id) >= 2  # both devices' sessions ended
            with pytest.raises(ubiquity.UnauthenticatedError):
                signed_in.list_stores()  # its session is gone, and the key no longer signs in
            signed_in.close()

        with pytest.raises(ValueError):
            op.accounts.create_api_key(account.account_id, ApiKeyScope.READ_ONLY, store_name="notes")
        with pytest.raises(ubiquity.NotFoundError):
            op.accounts.get_account("no-such-account")


def test_an_account_is_archived_restored_and_deleted(server: ubiq_harness.Ubiquityd) -> None:
    with operator(server) as op:
        account = op.accounts.create_account("archived")
        key = op.accounts.create_api_key(account.account_id)
        with ubiquity.Client(server.address, api_key=key.secret, device_id="d") as c:
            store = c.open_store("notes")
            store.register_model(person_model())
            store.save(inserts={"a": ("Person", {"name": "Ann"})})

            archived = op.accounts.archive_account(account.account_id)
            assert archived.state == AccountState.ARCHIVED
            assert op.accounts.get_account(account.account_id).state == AccountState.ARCHIVED
            with pytest.raises(ubiquity.UnauthenticatedError):
                c.list_stores()  # sessions ended, and the key signs in to nothing while archived
            with pytest.raises(ubiquity.FailedPreconditionError) as again:
                op.accounts.archive_account(account.account_id)
            assert again.value.reason == "ACCOUNT_ARCHIVED"

            assert op.accounts.restore_account(account.account_id).state == AccountState.ACTIVE
            # the refused call dropped the dead session: the same client signs in again by itself
            assert c.open_store("notes", must_exist=True).fetch("Person").count == 1  # back unchanged
            with pytest.raises(ubiquity.AlreadyExistsError) as active:
                op.accounts.restore_account(account.account_id)
            assert active.value.reason == "ACCOUNT_NOT_ARCHIVED"

        receipt = op.accounts.delete_account(account.account_id)
        assert receipt.stores_removed == 1 and receipt.api_keys_removed == 1 and receipt.bytes_removed > 0
        with pytest.raises(ubiquity.NotFoundError):
            op.accounts.get_account(account.account_id)
        assert account.account_id not in [a.account_id for a in op.accounts.list_accounts()]
        with pytest.raises(ubiquity.UnauthenticatedError):
            ubiquity.Client(server.address, api_key=key.secret, device_id="d").sign_in()
        with pytest.raises(ubiquity.FailedPreconditionError) as default:
            op.accounts.delete_account("default")
        assert default.value.reason == "DEFAULT_ACCOUNT"


def test_account_calls_need_the_operator_key(server: ubiq_harness.Ubiquityd, client: ubiquity.Client) -> None:
    with pytest.raises(ubiquity.UnauthenticatedError) as session:
        client.accounts.create_account("not mine")  # a session is not the operator
    assert session.value.reason == "BAD_CREDENTIALS"
    with ubiquity.Client(server.address) as anonymous:
        with pytest.raises(ubiquity.UnauthenticatedError) as none:
            anonymous.accounts.list_accounts()
    assert none.value.reason == "MISSING_CREDENTIALS"
    with operator(server) as op:
        assert [a.account_id for a in op.accounts.list_accounts()] == ["default"]  # nothing was made


def test_the_asyncio_account_calls(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, operator_key=server.operator_key) as op:
            account = await op.accounts.create_account("aio")
            assert [a async for a in op.accounts.list_accounts() if a.account_id == account.account_id] == [account]
            assert [a.account_id async for a in op.accounts.list_accounts(page_size=1)] == sorted(["default", account.account_id])
            writer = await op.accounts.create_api_key(account.account_id)
            async with ubiquity.aio.Client(server.address, api_key=writer.secret, device_id="w") as c:
                await (await c.open_store("notes")).register_model(person_model())
            reader = await op.accounts.create_api_key(account.account_id, ApiKeyScope.READ_ONLY)
            async with ubiquity.aio.Client(server.address, api_key=reader.secret, device_id="d") as c:
                store = await c.open_store("notes", must_exist=True)
                with pytest.raises(ubiquity.PermissionDeniedError) as denied:
                    await store.save(inserts={"a": ("Person", {"name": "Ann"})})
                assert denied.value.reason == "SCOPE_EXCEEDED"
                assert await op.accounts.revoke_api_key(reader.key.key_id) == 1
            assert (await op.accounts.archive_account(account.account_id)).state == AccountState.ARCHIVED
            assert (await op.accounts.restore_account(account.account_id)).state == AccountState.ACTIVE
            receipt = await op.accounts.delete_account(account.account_id)
            assert receipt.api_keys_removed == 2 and receipt.stores_removed == 1
            with pytest.raises(ubiquity.NotFoundError):
                await op.accounts.get_account(account.account_id)

    asyncio.run(scenario())
