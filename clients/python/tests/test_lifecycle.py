"""Store transitions on the feed (docs/lifecycle.md) and local sessions with the first-sign-in
import (docs/accounts.md "Local stores"), against a real ubiquityd: typed `StoreEvent`s in order
with the transactions, the `on_store_event` hook, and a feed that goes on after a sign-out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import ubiq_harness
import ubiquity
import ubiquity.aio
from conftest import person_model
from ubiquity import ImportCounts, Phase, StoreEvent, Transition


def meaningful(feed: ubiquity.ChangeFeed, n: int) -> list[ubiquity.FeedEvent]:
    """The next `n` events other than progress markers (the server sends those on its own clock)."""
    got: list[ubiquity.FeedEvent] = []
    for event in feed:
        if event.kind != "progress":
            got.append(event)
        if len(got) == n:
            break
    return got


def until_caught_up(feed: ubiquity.ChangeFeed) -> list[ubiquity.FeedEvent]:
    events = []
    for event in feed:
        events.append(event)
        if event.kind == "caught_up":
            return events
    raise AssertionError("the feed ended before it caught up")


def test_a_sign_out_reaches_the_feed_as_will_then_did_and_the_feed_goes_on(client: ubiquity.Client,
                                                                            store: ubiquity.Store) -> None:
    hooked: list[StoreEvent] = []
    feed = store.changes(on_store_event=hooked.append)
    until_caught_up(feed)  # subscribed: the sign-out concerns this stream
    first = store.save(inserts={"a": ("Person", {"name": "Ann"})})

    client.sign_out()  # returns once the transition is done: both events are on their way

    got = meaningful(feed, 3)
    assert [e.kind for e in got] == ["transactions", "store_event", "store_event"]
    will, did = got[1].store_event, got[2].store_event
    assert will is not None and did is not None
    assert (will.phase, will.transition) == (Phase.WILL_CHANGE, Transition.ACCOUNT_REMOVED)
    assert (did.phase, did.transition) == (Phase.DID_CHANGE, Transition.ACCOUNT_REMOVED)
    assert not will.using_local_storage and will.import_counts is None
    assert first.generation < will.generation < did.generation and did.token == got[2].resume_token
    assert hooked == [will, did]  # the hook saw each, in order, as it passed

    # The stream ended SESSION_REVOKED; the next save signs in again, the feed resubscribes from
    # the DID_CHANGE's token with the new session: the save is the next thing it delivers.
    second = store.save(inserts={"b": ("Person", {"name": "Bob"})})
    tx = next(feed.transactions())
    assert tx.generation == second.generation and [c.kind for c in tx.changes] == ["insert"]
    assert feed.reconnects >= 1
    feed.close()


def test_the_asyncio_feed_awaits_its_store_event_hook_in_order(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key, device_id="pytest-aio") as c:
            store = await c.open_store("aio-transitions")
            await store.register_model(person_model())
            hooked: list[StoreEvent] = []

            async def hook(e: StoreEvent) -> None:
                hooked.append(e)

            feed = await store.changes(on_store_event=hook)
            async for event in feed:
                if event.kind == "caught_up":
                    break
            await c.sign_out()
            events = [e async for e in _take(feed, 2)]
            assert [(e.store_event.phase, e.store_event.transition) for e in events if e.store_event] == [
                (Phase.WILL_CHANGE, Transition.ACCOUNT_REMOVED), (Phase.DID_CHANGE, Transition.ACCOUNT_REMOVED)]
            assert hooked == [e.store_event for e in events]
            saved = await store.save(inserts={"a": ("Person", {"name": "Ann"})})  # signs in again
            async for tx in feed.transactions():
                assert tx.generation == saved.generation
                break
            feed.close()

    asyncio.run(scenario())


async def _take(feed: ubiquity.aio.ChangeFeed, n: int):  # type: ignore[no-untyped-def]
    async for event in feed:
        if event.kind == "progress":
            continue
        yield event
        n -= 1
        if n == 0:
            return


@pytest.fixture
def local_server(tmp_path: Path) -> Iterator[ubiq_harness.Ubiquityd]:
    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, name="local", args=["--local-stores"],
                               interop=False).start()
    try:
        yield d
    finally:
        d.kill() if d.alive() else None


def test_local_work_is_imported_at_first_sign_in_and_the_import_is_announced(local_server: ubiq_harness.Ubiquityd) -> None:
    address = local_server.address
    with ubiquity.Client.start_local_session(address, "phone-1") as phone:
        secret = phone.device_secret
        assert secret.startswith("ubd_")
        assert phone.sign_in().local and phone.sign_in().account_id == ""
        phone.key_values.set("theme", b"dark")  # moves with the objects, counted apart
        local = phone.open_store("notes")
        local.register_model(person_model())
        local.save(inserts={"a": ("Person", {"name": "Ann", "email": "ann@x"}),
                            "b": ("Person", {"name": "Bob", "email": "bob@x"})})
        # unsaved work: the import waits for it (the context's chance to save, docs/lifecycle.md)
        draft = local.context("draft")
        draft.insert("Person", {"name": "Eve", "email": "eve@x"})

        hooked: list[StoreEvent] = []

        def save_before_the_import(e: StoreEvent) -> None:
            hooked.append(e)
            if e.phase is Phase.WILL_CHANGE:
                draft.save()

        local_feed = local.changes(on_store_event=save_before_the_import)
        first = next(local_feed)  # "you work in local storage", before anything else
        assert first.store_event == StoreEvent(Phase.DID_CHANGE, Transition.NONE, True, None,
                                               first.resume_token, first.resume_generation)

        # the same device, a second local session with its secret, sees the same store
        with ubiquity.Client.start_local_session(address, "phone-1", secret) as again:
            assert again.device_secret == secret
            assert [s.name for s in again.list_stores()] == ["notes"]

        with ubiquity.Client(address, api_key=local_server.api_key, device_id="phone-1",
                             local_device_secret=secret) as account, ThreadPoolExecutor(1) as pool:
            signing_in = pool.submit(account.sign_in)  # waits for the draft, which the hook saves
            # the local subscriber is told before its store goes, saves, then its stream ends
            with pytest.raises(ubiquity.UnauthenticatedError):
                for _ in local_feed:
                    pass
            signed = signing_in.result(timeout=60)
            assert not signed.local and signed.account_id == "default"
            assert signed.local_import == ImportCounts(inserted=3, merged=0, deduplicated=0,  # Eve too
                                                       key_values_moved=1, key_values_kept=0)
            assert [(e.phase, e.transition, e.using_local_storage) for e in hooked[1:]] == [
                (Phase.WILL_CHANGE, Transition.INITIAL_IMPORT_COMPLETED, True)]

            # the account's store of the same name holds the local objects, and its feed replays
            # the import's transaction and then the DID_CHANGE with the counts
            notes = account.open_store("notes", must_exist=True)
            assert sorted(p["name"] for p in notes.fetch("Person")) == ["Ann", "Bob", "Eve"]
            kinds: list[str] = []
            did: StoreEvent | None = None
            for event in notes.changes(start="oldest"):
                if event.kind != "progress":
                    kinds.append(event.kind)
                if event.store_event is not None:
                    did = event.store_event
                    break
            assert did is not None and kinds[-2:] == ["transactions", "store_event"]
            assert (did.phase, did.transition, did.using_local_storage) == (
                Phase.DID_CHANGE, Transition.INITIAL_IMPORT_COMPLETED, False)
            assert did.import_counts == signed.local_import

        # the local client's stores are gone; the device can start afresh, with a new secret
        with pytest.raises(ubiquity.UnauthenticatedError) as revoked:
            phone.list_stores()
        assert revoked.value.reason == "SESSION_REVOKED"
        with ubiquity.Client.start_local_session(address, "phone-1") as fresh:
            assert fresh.device_secret not in ("", secret) and fresh.list_stores() == []


def test_local_sessions_are_refused_with_a_typed_error_when_the_server_has_none(
        server: ubiq_harness.Ubiquityd) -> None:
    with pytest.raises(ubiquity.FailedPreconditionError) as e:
        ubiquity.Client.start_local_session(server.address, "phone-2")
    assert e.value.reason == "LOCAL_STORES_DISABLED"
    with pytest.raises(ValueError):
        ubiquity.Client(server.address, local_device_secret="ubd_x")  # a secret without a key to sign in


def test_a_wrong_device_secret_is_refused_and_changes_nothing(local_server: ubiq_harness.Ubiquityd) -> None:
    with ubiquity.Client.start_local_session(local_server.address, "phone-3") as phone:
        phone.open_store("notes").register_model(person_model())
        with pytest.raises(ubiquity.UnauthenticatedError) as e:
            ubiquity.Client.start_local_session(local_server.address, "phone-3", phone.device_secret + "x")
        assert e.value.reason == "BAD_CREDENTIALS"
        with pytest.raises(ubiquity.UnauthenticatedError):
            ubiquity.Client(local_server.address, api_key=local_server.api_key, device_id="phone-3",
                            local_device_secret="ubd_wrong").sign_in()
        assert [s.name for s in phone.list_stores()] == ["notes"]  # still local, untouched
