"""The typed key-value feed (docs/keyvalue.md "Change feed") and the Admin calls (admin.proto)
against a real ubiquityd."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import ubiq_harness
import ubiquity
import ubiquity.aio
from ubiquity import KeyValueChange, KeyValueChangeReason as Reason


def changes_until_caught_up(feed: ubiquity.ChangeFeed) -> list[KeyValueChange]:
    got = []
    for event in feed:
        if event.kind == "caught_up":
            return got
        if event.key_value_change is not None:
            got.append(event.key_value_change)
    raise AssertionError("the feed ended before it caught up")


def test_the_key_value_feed_syncs_follows_and_resumes_from_a_token(client: ubiquity.Client) -> None:
    kv = client.key_values
    kv.set("feed.a", b"1")
    kv.set("feed.b", b"2")

    feed = kv.changes(start="oldest", exclude_authors=["quiet-device"])
    initial = changes_until_caught_up(feed)
    assert {(c.key, c.value, c.reason) for c in initial} == {
        ("feed.a", b"1", Reason.INITIAL_SYNC), ("feed.b", b"2", Reason.INITIAL_SYNC)}

    written = kv.set("feed.c", b"3", author="laptop")
    kv.set("feed.quiet", b"-", author="quiet-device")  # excluded: moves the token, delivers nothing
    deleted = kv.delete("feed.a", author="laptop")
    live = feed.key_value_changes()
    c, a = next(live), next(live)
    assert (c.key, c.value, c.version, c.reason, c.author, c.deleted) == (
        "feed.c", b"3", written.version, Reason.SERVER_CHANGE, "laptop", False)
    assert (a.key, a.deleted, a.value, a.version) == ("feed.a", True, b"", deleted.version)
    assert a.sequence > c.sequence and a.token == feed.token
    feed.close()

    # a new feed from the change to feed/c's token: exactly what came after it
    resumed = kv.changes(start=c.token, exclude_authors=["quiet-device"])
    assert [(x.key, x.deleted) for x in changes_until_caught_up(resumed)] == [("feed.a", True)]
    resumed.close()

    # "now" is read when changes() returns: a write right after is the first change delivered
    now = kv.changes()
    kv.set("feed.d", b"4")
    assert next(now.key_value_changes()).key == "feed.d"
    now.close()


def test_the_key_value_feed_resumes_after_a_server_restart(tmp_path: Path) -> None:
    binary = ubiq_harness.find_server_binary()
    first = ubiq_harness.Ubiquityd(binary, tmp_path, name="kv-restart", interop=False).start()
    second = None
    try:
        with ubiquity.Client(first.address, api_key=first.api_key) as client:
            feed = client.key_values.changes(reconnect_for=60)
            client.key_values.set("restart.a", b"1")
            before = next(feed.key_value_changes())
            assert first.stop() == 0
            # same data directory and port: the feed subscribes again from its last token
            second = ubiq_harness.Ubiquityd(binary, tmp_path, name="kv-restart", interop=False,
                                            port=first.port or 0).start()
            written = client.key_values.set("restart.b", b"2")
            after = next(feed.key_value_changes())  # exactly the next change: nothing lost or repeated
            assert (before.key, after.key, after.version) == ("restart.a", "restart.b", written.version)
            assert after.sequence == before.sequence + 1 and feed.reconnects >= 1
            feed.close()
    finally:
        for d in (first, second):
            if d is not None and d.alive():
                d.kill()


def test_a_write_refused_for_a_quota_reaches_the_feed_as_a_quota_violation_notice(tmp_path: Path) -> None:
    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, name="kv-quota",
                               args=["--kv-max-keys", "1"], interop=False).start()
    try:
        with ubiquity.Client(d.address, api_key=d.api_key) as client:
            feed = client.key_values.changes()
            client.key_values.set("quota.a", b"1", author="laptop")
            live = feed.key_value_changes()
            stored = next(live)  # subscribed now: notices are live only
            with pytest.raises(ubiquity.KeyValueQuotaError):
                client.key_values.set("quota.b", b"2", author="laptop")
            notice = next(live)
            assert (stored.key, stored.reason) == ("quota.a", Reason.SERVER_CHANGE)
            assert (notice.key, notice.reason, notice.author, notice.version, notice.value) == (
                "quota.b", Reason.QUOTA_VIOLATION, "laptop", 0, b"")
            assert notice.token == stored.token  # a notice, not a change: the position did not move
            feed.close()
    finally:
        d.kill() if d.alive() else None


def test_the_asyncio_key_value_feed(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key, device_id="pytest-aio") as c:
            feed = await c.key_values.changes()
            written = await c.key_values.set("aio.x", b"1")
            async for change in feed.key_value_changes():
                assert (change.key, change.version, change.reason) == ("aio.x", written.version, Reason.SERVER_CHANGE)
                break
            feed.close()

    asyncio.run(scenario())


def test_a_bad_key_value_token_is_a_typed_error(client: ubiquity.Client, store: ubiquity.Store) -> None:
    feed = client.key_values.changes(start=store.current_token())  # a store's token is not a key-value one
    with pytest.raises(ubiquity.InvalidArgumentError) as e:
        next(feed)
    assert e.value.reason == "BAD_TOKEN"


def test_admin_reports_and_backs_up_and_restores_a_store(server: ubiq_harness.Ubiquityd, store: ubiquity.Store,
                                                         client: ubiquity.Client, tmp_path: Path) -> None:
    with ubiquity.Client(server.address, operator_key=server.operator_key) as operator:
        admin = operator.admin
        pong = admin.ping(b"hello")
        assert pong.payload == b"hello" and pong.server_time.year >= 2024
        info = admin.server_info()
        assert info.name == "ubiquityd" and info.listen_address.endswith(f":{server.port}")
        assert "ubiquity.v1.Admin" in info.services and info.limits.max_receive_message_bytes > 0
        assert info.event_loops >= 1
        stats = admin.server_stats()
        assert stats.open_connections >= 1 and stats.calls_by_status.get(0, 0) >= 2

        saved = store.save(inserts={"a": ("Person", {"name": "Ann"})})
        manifest = admin.backup(str(tmp_path / "backup"), store_id=store.id)
        assert [(s.store_id, s.name, s.generation) for s in manifest.stores] == [(store.id, store.name, saved.generation)]
        assert manifest.databases == [] and manifest.directory == str(tmp_path / "backup")
        assert (tmp_path / "backup" / manifest.stores[0].file).stat().st_size == manifest.stores[0].size_bytes

        store.save(inserts={"b": ("Person", {"name": "Bob"})})
        with pytest.raises(ubiquity.FailedPreconditionError) as refused:  # it exists: say so to replace it
            admin.restore_store(str(tmp_path / "backup"), store_id=store.id)
        assert refused.value.reason == "STORE_EXISTS"
        restored = admin.restore_store(str(tmp_path / "backup"), store_id=store.id, replace_existing=True)
        assert restored.store_id == store.id and restored.generation == saved.generation
        assert [p["name"] for p in store.fetch("Person")] == ["Ann"]
        assert store.current_token() == restored.token

    # an account's session is not the operator: refused, typed, nothing written
    with pytest.raises((ubiquity.UnauthenticatedError, ubiquity.PermissionDeniedError)):
        client.admin.backup(str(tmp_path / "not-mine"))
    assert not (tmp_path / "not-mine").exists()
    assert client.admin.ping(b"open").payload == b"open"  # Ping is open to any caller
    with pytest.raises(ValueError):
        ubiquity.Client(server.address, api_key="k", operator_key="o")


def test_asyncio_admin(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, operator_key=server.operator_key) as c:
            assert (await c.admin.ping(b"x")).payload == b"x"
            assert (await c.admin.server_info()).name == "ubiquityd"
            assert (await c.admin.server_stats()).accepted_connections >= 1

    asyncio.run(scenario())
