"""Sign-in with an API key: a bad key is a typed error; a session that expires is replaced and the
change feed resumes past its SESSION_EXPIRED ending with no gap."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import grpc.aio
import pytest

import ubiq_harness
import ubiquity
from conftest import person_model
from test_feed import next_transaction
from ubiquity.v1 import stores_pb2, stores_pb2_grpc


def test_a_bad_api_key_is_a_typed_unauthenticated_error(server: ubiq_harness.Ubiquityd) -> None:
    with ubiquity.Client(server.address, api_key="ubk_0123456789abcdef." + "x" * 43, device_id="t") as client:
        with pytest.raises(ubiquity.UbiquityError) as e:
            client.list_stores()
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED and e.value.reason == "BAD_CREDENTIALS"


def test_the_feed_resumes_after_its_session_expires(tmp_path: Path) -> None:
    # Sessions of 3 s, shorter than the client's refresh margin: it signs in again for every call,
    # and the subscription ends with SESSION_EXPIRED within a progress interval of its expiry.
    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, interop=False,
                               args=["--session-lifetime-seconds", "3", "--feed-progress-interval-ms", "100"]).start()
    try:
        with ubiquity.Client(d.address, api_key=d.api_key, device_id="t") as client:
            store = client.open_store("s")
            store.register_model(person_model())
            feed = store.changes(start="now", reconnect_for=60)
            first = store.save(inserts={"a": ("Person", {"name": "Ann"})})
            assert next_transaction(feed).generation == first.generation
            # one save at a time until the feed has resubscribed (its session expired): each save
            # arrives as the next transaction, so nothing is lost or repeated across the ending

            def step() -> bool:
                r = store.save(inserts={"x": ("Person", {"name": "tick"})})
                assert next_transaction(feed).generation == r.generation
                return feed.reconnects >= 1

            ubiq_harness.wait_until(step, 60, interval=0.2, message="the feed to resubscribe after SESSION_EXPIRED")
            feed.close()
    finally:
        d.kill()


def test_the_aio_feed_resumes_after_its_session_expires(tmp_path: Path) -> None:
    # As above with the asyncio client: AsyncSession signs in again on the aio channel, and the
    # feed resubscribes with the new session from its last token.
    import asyncio

    import ubiquity.aio

    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, interop=False,
                               args=["--session-lifetime-seconds", "3", "--feed-progress-interval-ms", "100"]).start()

    async def scenario() -> None:
        async with ubiquity.aio.Client(d.address, api_key=d.api_key, device_id="t") as client:
            store = await client.open_store("s")
            await store.register_model(person_model())
            feed = await store.changes(start="now", reconnect_for=60)
            txs = feed.transactions()
            session = client._calls.session
            assert session is not None
            tokens = set()
            # one save at a time, each the next transaction, until the feed has resubscribed
            # (polled as ubiq_harness.wait_until does, within 60 s)
            deadline = asyncio.get_running_loop().time() + 60
            while feed.reconnects < 1 and asyncio.get_running_loop().time() < deadline:
                r = await store.save(inserts={"x": ("Person", {"name": "tick"})})
                assert (await txs.__anext__()).generation == r.generation
                tokens.add(session.state.token)
                await asyncio.sleep(0.2)
            assert feed.reconnects >= 1, "the feed did not resubscribe after SESSION_EXPIRED"
            assert len(tokens) >= 2  # the session was renewed on the way
            feed.close()

    try:
        asyncio.run(scenario())
    finally:
        d.kill()


class PausedSignIns(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Holds every `Accounts/SignIn` after the first until released, and keeps the tokens they made."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.tokens: list[str] = []

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        if details.method.endswith("/SignIn"):
            if self.tokens:
                self.entered.set()
                self.release.wait(60)
            outcome = continuation(details, request)
            self.tokens.append(outcome.result().session_token)
            return outcome
        return continuation(details, request)


def revoked(address: str, token: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        with pytest.raises(grpc.RpcError) as e:
            stores_pb2_grpc.StoresStub(channel).ListStores(stores_pb2.ListStoresRequest(),
                                                           metadata=[("authorization", f"Bearer {token}")], timeout=30)
    return e.value.code() == grpc.StatusCode.UNAUTHENTICATED and "SESSION_REVOKED" in str(e.value.trailing_metadata())


def test_a_sign_out_during_a_renewal_ends_the_renewed_session(tmp_path: Path) -> None:
    # Sessions shorter than the refresh margin: every call renews. A sign-out that ended the old
    # token while the renewal was in flight would leave the renewed session alive after sign_out()
    # returned, and the client sending it; the sign-out waits for the renewal and ends what it made.
    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, interop=False,
                               args=["--session-lifetime-seconds", "3"]).start()
    paused = PausedSignIns()
    try:
        with ubiquity.Client(d.address, api_key=d.api_key, device_id="t", interceptors=[paused]) as client:
            client.sign_in()
            with ThreadPoolExecutor(2) as pool:
                renewing = pool.submit(client.list_stores)  # renews first: held in its SignIn
                assert paused.entered.wait(60)
                signing_out = pool.submit(client.sign_out)
                paused.release.set()
                renewing.result(timeout=60)
                signing_out.result(timeout=60)
            first, renewed = paused.tokens[:2]
            assert revoked(d.address, renewed)
            assert client.list_stores() == [] and paused.tokens[-1] not in (first, renewed)
    finally:
        d.kill()


class AsyncPausedSignIns(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """`PausedSignIns` for `grpc.aio` channels."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.tokens: list[str] = []

    async def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if method.endswith("/SignIn"):
            if self.tokens:
                self.entered.set()
                await self.release.wait()
            call = await continuation(details, request)
            self.tokens.append((await call).session_token)
            return call
        return await continuation(details, request)


def test_an_asyncio_sign_out_during_a_renewal_ends_the_renewed_session(tmp_path: Path) -> None:
    # As above, with tasks: the renewal and the sign-out share the asyncio session's state.
    import ubiquity.aio

    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, interop=False,
                               args=["--session-lifetime-seconds", "3"]).start()

    async def scenario() -> None:
        paused = AsyncPausedSignIns()
        async with ubiquity.aio.Client(d.address, api_key=d.api_key, device_id="t", interceptors=[paused]) as client:
            await client.sign_in()
            renewing = asyncio.create_task(client.list_stores())
            await paused.entered.wait()
            signing_out = asyncio.create_task(client.sign_out())
            # one turn of the loop (not a wait for time): the sign-out task starts and, finding the
            # renewal in flight, waits for it, before the renewal is released
            await asyncio.sleep(0)
            paused.release.set()
            await asyncio.wait_for(asyncio.gather(renewing, signing_out), 60)
            first, renewed = paused.tokens[:2]
            assert revoked(d.address, renewed)
            assert await client.list_stores() == [] and paused.tokens[-1] not in (first, renewed)

    try:
        asyncio.run(scenario())
    finally:
        d.kill()
