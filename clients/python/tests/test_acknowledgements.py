"""Acknowledged store events against a real ubiquityd (docs/lifecycle.md "Acknowledgements"): feeds
opened with `acknowledges_store_events=True` acknowledge a sign-out's WILL_CHANGE from their hook
while `sign_out()` runs on another thread (or task), which used to deadlock on the client's session
lock; a subscriber that never acknowledges holds the transition until the server's deadline; a
transition a kill -9 interrupted is closed by a cancelled DID_CHANGE after the restart."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import grpc

import ubiq_harness
import ubiquity
import ubiquity.aio
from conftest import person_model
from test_lifecycle import until_caught_up
from ubiquity import Phase, StoreEvent, Transition


def server(tmp_path: Path, ack_seconds: int) -> ubiq_harness.Ubiquityd:
    return ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, interop=False,
                                  args=["--transition-ack-seconds", str(ack_seconds)]).start()


def store_events(feed: ubiquity.ChangeFeed, n: int) -> list[StoreEvent]:
    """The next `n` store events (transactions and progress pass by)."""
    got = []
    for event in feed:
        if event.store_event is not None:
            got.append(event.store_event)
            if len(got) == n:
                return got
    raise AssertionError("the feed ended")


def test_two_feeds_acknowledging_from_their_hooks_let_a_sign_out_on_another_thread_finish(tmp_path: Path) -> None:
    # A deadline far beyond the client's 30 s call timeout: the SignOut returns in time only if
    # both hooks' acknowledgements reached the server and counted (sent with the session it ends).
    srv = server(tmp_path, 600)
    try:
        with ubiquity.Client(srv.address, timeout=30, api_key=srv.api_key, device_id="acking") as client:
            stores = [client.open_store(name) for name in ("notes", "tasks")]
            acked: dict[str, list[bool]] = {s.name: [] for s in stores}
            feeds = []
            for s in stores:
                s.register_model(person_model())

                def hook(event: StoreEvent, s: ubiquity.Store = s) -> None:
                    if event.phase == Phase.WILL_CHANGE:
                        assert event.acknowledgement is not None
                        assert event.acknowledgement.event_token == event.token
                        acked[s.name].append(s.acknowledge_store_event(event))

                feeds.append(s.changes(on_store_event=hook, acknowledges_store_events=True))
                until_caught_up(feeds[-1])  # subscribed: the sign-out waits for this stream
            with ThreadPoolExecutor(2) as pool:
                reading = [pool.submit(store_events, f, 2) for f in feeds]
                client.sign_out()
                got = [r.result(timeout=60) for r in reading]
            for will, did in got:
                assert (will.phase, will.transition) == (Phase.WILL_CHANGE, Transition.ACCOUNT_REMOVED)
                assert (did.phase, did.transition) == (Phase.DID_CHANGE, Transition.ACCOUNT_REMOVED)
                assert did.acknowledgement is None and not did.cancelled
            assert acked == {"notes": [True], "tasks": [True]}  # each was what the transition waited for
            assert [s.name for s in client.list_stores()] == ["notes", "tasks"]  # signed in anew
            for f in feeds:
                f.close()
    finally:
        srv.stop()


def test_asyncio_feeds_acknowledging_from_their_hooks_let_a_concurrent_sign_out_finish(tmp_path: Path) -> None:
    srv = server(tmp_path, 600)

    async def scenario() -> None:
        async with ubiquity.aio.Client(srv.address, timeout=30, api_key=srv.api_key, device_id="aio-acking") as client:
            acked: list[bool] = []
            feeds = []
            for name in ("notes", "tasks"):
                s = await client.open_store(name)
                await s.register_model(person_model())

                async def hook(event: StoreEvent, s: ubiquity.aio.Store = s) -> None:
                    if event.phase == Phase.WILL_CHANGE:
                        acked.append(await s.acknowledge_store_event(event))

                feed = await s.changes(on_store_event=hook, acknowledges_store_events=True)
                async for event in feed:
                    if event.kind == "caught_up":
                        break
                feeds.append(feed)

            async def two_events(feed: ubiquity.aio.ChangeFeed) -> list[StoreEvent]:
                got = []
                async for event in feed:
                    if event.store_event is not None:
                        got.append(event.store_event)
                        if len(got) == 2:
                            break
                return got

            *got, _ = await asyncio.gather(*(two_events(f) for f in feeds), client.sign_out())
            assert [[e.phase for e in g] for g in got] == [[Phase.WILL_CHANGE, Phase.DID_CHANGE]] * 2
            assert acked == [True, True]
            assert len(await client.list_stores()) == 2
            for f in feeds:
                f.close()

    try:
        asyncio.run(scenario())
    finally:
        srv.stop()


def test_a_subscriber_that_does_not_acknowledge_holds_the_sign_out_until_the_deadline(tmp_path: Path) -> None:
    srv = server(tmp_path, 2)
    try:
        with ubiquity.Client(srv.address, timeout=30, api_key=srv.api_key, device_id="half-acking") as client:
            acking, silent = client.open_store("acking"), client.open_store("silent")
            acked: list[bool] = []

            def hook(event: StoreEvent) -> None:
                if event.phase == Phase.WILL_CHANGE:
                    acked.append(acking.acknowledge_store_event(event))

            feeds = [acking.changes(on_store_event=hook, acknowledges_store_events=True),
                     silent.changes(acknowledges_store_events=True)]
            for f in feeds:
                until_caught_up(f)
            with ThreadPoolExecutor(2) as pool:
                reading = [pool.submit(store_events, f, 2) for f in feeds]
                client.sign_out()
                returned = datetime.now(timezone.utc)
                (_, acking_did), (silent_will, silent_did) = [r.result(timeout=60) for r in reading]
            assert acked == [True]  # the transition waited for it too
            assert silent_will.acknowledgement is not None
            # the silent subscriber held the transition until its deadline, not a moment less
            assert returned >= silent_will.acknowledgement.deadline
            assert not acking_did.cancelled and not silent_did.cancelled  # then it went on
            for f in feeds:
                f.close()
    finally:
        srv.stop()


def test_a_sign_out_killed_while_it_waits_is_closed_by_a_cancelled_did_change(tmp_path: Path) -> None:
    srv = server(tmp_path, 600)
    api_key = srv.api_key
    assert api_key is not None
    try:
        with ubiquity.Client(srv.address, timeout=30, api_key=api_key, device_id="killed") as client:
            store = client.open_store("notes")
            store.register_model(person_model())
            saved = store.save(inserts={"a": ("Person", {"name": "Ann"})})
            feed = store.changes(acknowledges_store_events=True)  # never acknowledges: the sign-out waits
            until_caught_up(feed)
            ended: list[BaseException] = []

            def sign_out() -> None:
                try:
                    client.sign_out()
                except ubiquity.UbiquityError as e:
                    ended.append(e)

            signing_out = threading.Thread(target=sign_out)
            signing_out.start()
            [will] = store_events(feed, 1)
            srv.kill()  # SIGKILL while the transition waits for the acknowledgement
            signing_out.join()
            assert [getattr(e, "code", None) for e in ended] == [grpc.StatusCode.UNAVAILABLE]  # cut off
            feed.close()
        srv.start()
        with ubiquity.Client(srv.address, timeout=30, api_key=api_key, device_id="killed") as client:
            store = client.open_store("notes", must_exist=True)
            feed = store.changes(start=will.token)
            [did] = store_events(feed, 1)
            assert (did.phase, did.transition, did.cancelled) == (Phase.DID_CHANGE, Transition.ACCOUNT_REMOVED, True)
            assert did.generation > will.generation
            assert list(store.get([saved.permanent_ids["a"]])) == [saved.permanent_ids["a"]]  # as it was
            feed.close()
    finally:
        srv.stop()


def test_a_sign_out_the_server_holds_past_the_client_timeout_still_returns(tmp_path: Path) -> None:
    # The server holds this SignOut until a silent subscriber's acknowledgement deadline (3 s),
    # past the signing-out client's 1 s call timeout: SignOut's deadline is at least
    # TRANSITION_SECONDS, so it returns instead of failing DEADLINE_EXCEEDED on a sign-out the
    # server then finishes.
    srv = server(tmp_path, 3)
    try:
        with ubiquity.Client(srv.address, timeout=30, api_key=srv.api_key, device_id="slow-link") as listener, \
                ubiquity.Client(srv.address, timeout=1, api_key=srv.api_key, device_id="slow-link") as client:
            client.open_store("notes")  # signs in
            feed = listener.open_store("notes").changes(acknowledges_store_events=True)
            until_caught_up(feed)
            client.sign_out()
            returned = datetime.now(timezone.utc)
            will, did = store_events(feed, 2)
            assert will.acknowledgement is not None and returned >= will.acknowledgement.deadline
            assert did.phase == Phase.DID_CHANGE and not did.cancelled
            feed.close()
    finally:
        srv.stop()
