"""The account's key-value store (issue 18, SPEC §3 KeyValue, docs/keyvalue.md): Get, Set,
Delete, List, compare-and-set, quotas, bad keys, and key-value changes on Changes.Subscribe,
against the real ubiquityd over TCP with real SQLite files.

Tests on the shared server work under a key prefix of their own (every test acts for the same
account); tests that need a clean account, small quotas, a restart or a kill -9 start their own.
Streams are read by a thread into a queue; tests wait for the events that matter, never for time.
"""

from __future__ import annotations

import queue
import threading
import uuid

import grpc
import pytest
from grpc_status import rpc_status

import ubiq_harness
from conftest import make_channel, ping_ok
from test_accounts import Tenant, bearer, raw  # noqa: F401  (raw is a fixture)
from test_changes import Stream
from ubiq_client import Client, error_of
from ubiquity.v1 import accounts_pb2 as ac
from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import keyvalue_pb2 as kv
from ubiquity.v1 import keyvalue_pb2_grpc as kvg

TIMEOUT = 30
SERVER_CHANGE = ch.KeyValueChange.REASON_SERVER_CHANGE
INITIAL_SYNC = ch.KeyValueChange.REASON_INITIAL_SYNC


def prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}."


def kv_set(c: Client, key: str, value: bytes, **kw) -> kv.KeyValueWriteResponse:
    return c.kv.Set(kv.KeyValueSetRequest(key=key, value=value, **kw), timeout=TIMEOUT, metadata=c.md)


def kv_get(c: Client, key: str) -> kv.KeyValueEntry:
    return c.kv.Get(kv.KeyValueGetRequest(key=key), timeout=TIMEOUT, metadata=c.md)


def kv_delete(c: Client, key: str, **kw) -> kv.KeyValueWriteResponse:
    return c.kv.Delete(kv.KeyValueDeleteRequest(key=key, **kw), timeout=TIMEOUT, metadata=c.md)


def kv_list(c: Client, **kw) -> kv.KeyValueListResponse:
    return c.kv.List(kv.KeyValueListRequest(**kw), timeout=TIMEOUT, metadata=c.md)


def list_all(c: Client, pfx: str, page_size: int = 0) -> list[kv.KeyValueEntry]:
    out, token = [], b""
    while True:
        r = kv_list(c, prefix=pfx, page_size=page_size, page_token=token)
        out.extend(r.entries)
        if not r.next_page_token:
            return out
        token = r.next_page_token


def details_of(err: grpc.RpcError, message_type):
    status = rpc_status.from_call(err)
    for d in status.details:
        if d.Is(message_type.DESCRIPTOR):
            m = message_type()
            d.Unpack(m)
            return m
    raise AssertionError(f"no {message_type.DESCRIPTOR.name} in the status details of {err}")


def refused(call, *args, **kw) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        call(*args, **kw)
    return e.value


class KVStream(Stream):
    """A key-value subscription (test_changes.Stream: read by a thread into `events`)."""

    def __init__(self, c: Client, start: ch.StartPoint | None = None, exclude_authors=()):
        req = ch.SubscribeRequest(key_values=ch.KeyValueSubscription(exclude_authors=list(exclude_authors)))
        if start is not None:
            getattr(req, "from").CopyFrom(start)
        super().__init__(c.channel, req)

    def changes(self, n: int, pfx: str) -> list[ch.SubscribeResponse]:
        """The next `n` key-value changes under `pfx` (other tests' keys and markers skipped)."""
        out = []
        while len(out) < n:
            r = self.next()
            if r.WhichOneof("event") == "key_value_change" and r.key_value_change.key.startswith(pfx):
                out.append(r)
        return out


def from_token(t: bytes) -> ch.StartPoint:
    return ch.StartPoint(token=t)


# -- Get / Set / Delete ----------------------------------------------------------------------

def test_set_get_delete_and_versions(client):
    k = prefix() + "theme"
    w1 = kv_set(client, k, b"dark", author="dev-a")
    assert w1.version == 1 and len(w1.feed_token) == 18
    e = kv_get(client, k)
    assert (e.key, e.value, e.version, e.author, e.value_size) == (k, b"dark", 1, "dev-a", 4)
    assert e.update_time.seconds > 0
    assert kv_set(client, k, b"").version == 2  # an empty value is a value
    assert kv_get(client, k).value == b""
    d = kv_delete(client, k)
    assert d.existed and d.version == 3
    err = refused(kv_get, client, k)
    code, _, reason, _, _ = error_of(err)
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "KEY_NOT_FOUND")
    again = kv_delete(client, k)
    assert not again.existed and again.version == 3
    # set again after a delete: versions go on, so an old expected version never matches again
    assert kv_set(client, k, b"light").version == 4


def test_compare_and_set(client):
    k = prefix() + "seeded"
    assert kv_set(client, k, b"1", precondition=kv.KeyValuePrecondition(must_not_exist=True)).version == 1
    err = refused(kv_set, client, k, b"2", precondition=kv.KeyValuePrecondition(must_not_exist=True))
    code, msg, reason, _, _ = error_of(err)
    assert (code, reason) == (grpc.StatusCode.ABORTED, "KEY_VERSION_CONFLICT")
    d = details_of(err, kv.KeyValueConflictDetails)
    assert (d.key, d.exists, d.current_version) == (k, True, 1)
    assert "version 1" in msg
    err = refused(kv_set, client, k, b"2", precondition=kv.KeyValuePrecondition(expected_version=7))
    assert details_of(err, kv.KeyValueConflictDetails).current_version == 1
    assert kv_get(client, k).value == b"1"  # nothing changed
    assert kv_set(client, k, b"2", precondition=kv.KeyValuePrecondition(expected_version=1)).version == 2
    err = refused(kv_delete, client, k, precondition=kv.KeyValuePrecondition(expected_version=1))
    assert error_of(err)[2] == "KEY_VERSION_CONFLICT"
    assert kv_get(client, k).value == b"2"
    assert kv_delete(client, k, precondition=kv.KeyValuePrecondition(expected_version=2)).existed
    err = refused(kv_set, client, k, b"3", precondition=kv.KeyValuePrecondition(expected_version=3))
    d = details_of(err, kv.KeyValueConflictDetails)
    assert (d.exists, d.current_version) == (False, 3)  # deleted: the tombstone's version
    assert kv_set(client, k, b"3", precondition=kv.KeyValuePrecondition(must_not_exist=True)).version == 4


def test_compare_and_set_race_between_two_clients_loses_no_increment(client, second):
    k = prefix() + "counter"
    kv_set(client, k, b"0")
    rounds = 40
    conflicts = {"n": 0}
    versions: list[int] = []
    lock = threading.Lock()

    def increment(c: Client):
        for _ in range(rounds):
            while True:
                e = kv_get(c, k)
                try:
                    w = kv_set(c, k, str(int(e.value) + 1).encode(),
                               precondition=kv.KeyValuePrecondition(expected_version=e.version))
                except grpc.RpcError as err:
                    assert error_of(err)[2] == "KEY_VERSION_CONFLICT"
                    with lock:
                        conflicts["n"] += 1
                    continue
                with lock:
                    versions.append(w.version)
                break

    threads = [threading.Thread(target=increment, args=(c,)) for c in (client, second)]
    for t in threads: t.start()
    for t in threads: t.join(120)
    final = kv_get(client, k)
    assert int(final.value) == 2 * rounds, f"lost increments ({conflicts['n']} conflicts retried)"
    assert sorted(versions) == list(range(2, 2 * rounds + 2))  # each version granted once
    assert final.version == 2 * rounds + 1


# -- List ------------------------------------------------------------------------------------

def test_list_pages_through_many_keys_in_key_order(client):
    p = prefix()
    keys = [f"{p}k{i:04d}" for i in range(257)]
    for k in keys:
        kv_set(client, k, k.encode())
    kv_set(client, p[:-1] + "-other", b"x")  # shares the first characters, not the prefix
    entries = list_all(client, p, page_size=10)
    assert [e.key for e in entries] == sorted(keys)
    assert all(e.value == e.key.encode() for e in entries)
    assert [e.key for e in list_all(client, p)] == sorted(keys)  # default page size (100)
    first = kv_list(client, prefix=p, page_size=5, keys_only=True)
    assert len(first.entries) == 5 and all(e.value == b"" and e.value_size > 0 for e in first.entries)
    assert first.usage.keys >= 258 and first.usage.max_keys == 1024
    # a page token is tied to its prefix
    err = refused(kv_list, client, prefix=p + "k", page_token=first.next_page_token)
    code, _, reason, violations, _ = error_of(err)
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_TOKEN")
    assert violations[0].field == "page_token"
    err = refused(kv_list, client, prefix=p, page_size=1001)
    assert error_of(err)[0] == grpc.StatusCode.INVALID_ARGUMENT
    # a deleted key leaves the listing; the next page after it still continues correctly
    kv_delete(client, keys[5])
    second_page = kv_list(client, prefix=p, page_size=5, page_token=first.next_page_token)
    assert [e.key for e in second_page.entries] == sorted(keys)[6:11]
    for k in keys:
        kv_delete(client, k)
    assert list_all(client, p) == []


# -- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("key,why", [
    ("", "required"),
    ("a\x00b", "control character"),
    ("line\nbreak", "control character"),
    ("del\x7f", "control character"),
    ("c1\u0085", "control character"),
    ("settings/theme", "path separator"),
    ("settings\\theme", "path separator"),
])
def test_malformed_keys_are_refused_and_change_nothing(client, server, key, why):
    before = kv_list(client).usage
    for call in (lambda: kv_set(client, key, b"v"), lambda: kv_get(client, key), lambda: kv_delete(client, key)):
        err = refused(call)
        code, msg, reason, violations, _ = error_of(err)
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_KEY")
        assert why in msg and violations[0].field == "key"
    if key:
        # a List prefix no key can start with is refused too, not answered with an empty page
        code, msg, reason, violations, _ = error_of(refused(kv_list, client, prefix=key))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_KEY")
        assert why in msg and violations[0].field == "prefix"
    after = kv_list(client).usage
    assert (after.keys, after.bytes) == (before.keys, before.bytes)
    ping_ok(server.address)


def test_oversized_key_and_value_get_resource_exhausted_with_the_quota(client):
    long_key = "k" * 129
    err = refused(kv_set, client, long_key, b"v")
    code, msg, reason, _, _ = error_of(err)
    assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "KEY_VALUE_QUOTA")
    q = details_of(err, kv.KeyValueQuotaDetails)
    assert (q.quota, q.limit, q.requested) == (kv.KeyValueQuotaDetails.QUOTA_KEY_BYTES, 128, 129)
    assert "--kv-max-key-bytes" in msg
    # 128 bytes of UTF-8 is the limit, however many characters that is
    assert error_of(refused(kv_get, client, "é" * 65))[2] == "KEY_VALUE_QUOTA"
    k = prefix() + "big"
    err = refused(kv_set, client, k, b"x" * (64 * 1024 + 1))
    q = details_of(err, kv.KeyValueQuotaDetails)
    assert (q.quota, q.limit, q.requested) == (kv.KeyValueQuotaDetails.QUOTA_VALUE_BYTES, 65536, 65537)
    assert error_of(refused(kv_get, client, k))[2] == "KEY_NOT_FOUND"
    assert kv_set(client, k, b"x" * (64 * 1024)).version == 1
    kv_delete(client, k)


def test_account_quotas(start_server):
    srv = start_server(args=["--kv-max-keys", "3", "--kv-max-account-bytes", "100", "--kv-max-value-bytes", "60"])
    c = Client(make_channel(srv.address))
    try:
        kv_set(c, "a", b"x" * 10)
        kv_set(c, "b", b"x" * 10)
        kv_set(c, "c", b"x" * 10)
        err = refused(kv_set, c, "d", b"")
        q = details_of(err, kv.KeyValueQuotaDetails)
        assert (q.quota, q.limit, q.used, q.requested) == (kv.KeyValueQuotaDetails.QUOTA_KEYS, 3, 3, 4)
        # bytes: 3 keys of 1 + 10 bytes = 33; "a" grown to 60 would make 83; to 60 + more no
        kv_set(c, "a", b"x" * 60)
        err = refused(kv_set, c, "b", b"x" * 50)
        q = details_of(err, kv.KeyValueQuotaDetails)
        assert (q.quota, q.limit, q.used, q.requested) == (kv.KeyValueQuotaDetails.QUOTA_ACCOUNT_BYTES, 100, 83, 123)
        assert kv_get(c, "b").value == b"x" * 10  # nothing changed
        usage = kv_list(c).usage
        assert (usage.keys, usage.bytes, usage.max_bytes) == (3, 83, 100)
        kv_delete(c, "c")
        assert kv_set(c, "d", b"").version == 1  # room again
        assert (kv_list(c).usage.keys, kv_list(c).usage.bytes) == (3, 73)
    finally:
        c.channel.close()


# -- the change feed -------------------------------------------------------------------------

def test_changes_reach_subscribers_in_order_and_resume_from_any_token(client, second):
    p = prefix()
    s = KVStream(second)
    try:
        s.caught_up()
        kv_set(client, p + "a", b"1", author="dev-a")
        kv_set(client, p + "b", b"2")
        kv_delete(client, p + "a", author="dev-b")
        got = s.changes(3, p)
        assert [(r.key_value_change.key, r.key_value_change.value, r.key_value_change.version,
                 r.key_value_change.deleted, r.key_value_change.author) for r in got] == [
            (p + "a", b"1", 1, False, "dev-a"), (p + "b", b"2", 1, False, ""), (p + "a", b"", 2, True, "dev-b")]
        assert all(r.key_value_change.reason == SERVER_CHANGE for r in got)
        assert [r.resume_generation for r in got] == sorted(r.resume_generation for r in got)
    finally:
        s.cancel()
    # resume after the first change: the later ones, none before it
    kv_set(client, p + "c", b"3")
    r = KVStream(second, from_token(got[0].resume_token))
    try:
        later = [x for x in r.caught_up() if x.WhichOneof("event") == "key_value_change" and x.key_value_change.key.startswith(p)]
        assert [(x.key_value_change.key, x.key_value_change.deleted) for x in later] == [(p + "b", False), (p + "a", True), (p + "c", False)]
    finally:
        r.cancel()


def test_a_key_changed_again_is_delivered_once_in_its_latest_state(client):
    p = prefix()
    token = kv_set(client, p + "x", b"1").feed_token
    kv_set(client, p + "x", b"2")
    kv_set(client, p + "y", b"y")
    kv_set(client, p + "x", b"3")
    s = KVStream(client, from_token(token))
    try:
        got = [x.key_value_change for x in s.caught_up() if x.WhichOneof("event") == "key_value_change" and x.key_value_change.key.startswith(p)]
        assert [(c.key, c.value, c.version) for c in got] == [(p + "y", b"y", 1), (p + "x", b"3", 3)]
    finally:
        s.cancel()


def test_list_then_subscribe_from_its_feed_token_converges(client, second):
    p = prefix()
    for i in range(30):
        kv_set(client, f"{p}{i:02d}", b"v0")
    copy, token, first_token = {}, b"", None
    while True:
        page = kv_list(second, prefix=p, page_size=7, page_token=token)
        first_token = first_token or page.feed_token
        copy.update({e.key: e.value for e in page.entries})
        if len(copy) == 14:  # changes while the copy is half made
            kv_set(client, f"{p}00", b"v1")
            kv_delete(client, f"{p}20")
        if not page.next_page_token:
            break
        token = page.next_page_token
    s = KVStream(second, from_token(first_token))
    try:
        for r in s.caught_up():
            if r.WhichOneof("event") == "key_value_change" and r.key_value_change.key.startswith(p):
                c = r.key_value_change
                if c.deleted:
                    copy.pop(c.key, None)
                else:
                    copy[c.key] = c.value
        assert copy == {e.key: e.value for e in list_all(client, p)}
    finally:
        s.cancel()


def test_excluded_authors_are_skipped_but_the_token_moves(client, second):
    p = prefix()
    s = KVStream(second, exclude_authors=["me"])
    try:
        s.caught_up()
        kv_set(client, p + "mine", b"1", author="me")
        kv_set(client, p + "theirs", b"2", author="them")
        got = s.changes(1, p)
        assert got[0].key_value_change.key == p + "theirs"
    finally:
        s.cancel()


def test_a_progress_marker_moves_the_token_past_excluded_changes(start_server):
    srv = start_server(args=["--feed-progress-interval-ms", "100"])
    c = Client(make_channel(srv.address))
    try:
        s = KVStream(c, exclude_authors=["me"])
        try:
            s.caught_up()
            token = kv_set(c, "mine", b"1", author="me").feed_token
            events = s.until(lambda r: r.WhichOneof("event") == "progress")
            assert [r.WhichOneof("event") for r in events] == ["progress"]  # the excluded change is not sent
            assert events[-1].resume_token == token
        finally:
            s.cancel()
    finally:
        c.channel.close()


def test_initial_sync_from_oldest_then_live(start_server):
    srv = start_server()
    c = Client(make_channel(srv.address))
    try:
        kv_set(c, "kept", b"1")
        kv_set(c, "gone", b"2")
        kv_delete(c, "gone")
        kv_set(c, "kept", b"3")
        s = KVStream(c, ch.StartPoint(oldest=True))
        try:
            events = s.caught_up()
            sync = [r.key_value_change for r in events if r.WhichOneof("event") == "key_value_change"]
            assert [(x.key, x.value, x.reason) for x in sync] == [("kept", b"3", INITIAL_SYNC)]  # no tombstones
            kv_set(c, "new", b"4")
            live = s.changes(1, "")
            assert live[0].key_value_change.reason == SERVER_CHANGE
        finally:
            s.cancel()
    finally:
        c.channel.close()


def test_bad_key_value_subscriptions(client):
    sid = client.open()
    store_token = client.current(sid).token
    cases = [
        (ch.SubscribeRequest(store_id=sid, key_values=ch.KeyValueSubscription()), "INVALID_ARGUMENT"),
        (ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": ch.StartPoint(token=store_token)}), "BAD_TOKEN"),
        (ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": ch.StartPoint(token=b"K\x01" + b"\x00" * 16)}), "BAD_TOKEN"),
    ]
    future = bytearray(kv_set(client, prefix() + "f", b"").feed_token)
    future[10:18] = (2**62).to_bytes(8, "big")
    cases.append((ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": ch.StartPoint(token=bytes(future))}), "BAD_TOKEN"))
    for req, reason in cases:
        with pytest.raises(grpc.RpcError) as e:
            list(client.changes.Subscribe(req, timeout=TIMEOUT, metadata=client.md))
        code, _, got, _, _ = error_of(e.value)
        assert (code, got) == (grpc.StatusCode.INVALID_ARGUMENT, reason)


def test_shutdown_ends_key_value_subscriptions_with_their_resume_token(start_server):
    srv = start_server()
    c = Client(make_channel(srv.address))
    try:
        last = kv_set(c, "k", b"1").feed_token
        s = KVStream(c, ch.StartPoint(oldest=True))
        s.caught_up()
        srv.send_signal(2)
        err = s.ended.get(timeout=TIMEOUT)
        assert err is not None
        code, _, reason, _, _ = error_of(err)
        assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN")
        assert details_of(err, ch.ResumeDetails).resume_token == last
        assert srv.wait(30) == 0
    finally:
        c.channel.close()


# -- durability ------------------------------------------------------------------------------

def test_values_and_feed_positions_survive_a_restart(start_server):
    srv = start_server(name="kvrestart")
    c = Client(make_channel(srv.address))
    kv_set(c, "a", b"1")
    token = kv_set(c, "b", b"2").feed_token
    kv_set(c, "c", b"3")
    kv_delete(c, "a")
    c.channel.close()
    assert srv.stop() == 0
    srv.start()
    c = Client(make_channel(srv.address))
    try:
        assert [(e.key, e.value, e.version) for e in list_all(c, "")] == [("b", b"2", 1), ("c", b"3", 1)]
        s = KVStream(c, from_token(token))
        try:
            got = [r.key_value_change for r in s.caught_up() if r.WhichOneof("event") == "key_value_change"]
            assert [(x.key, x.deleted) for x in got] == [("c", False), ("a", True)]
            kv_set(c, "d", b"4")
            assert s.changes(1, "d")[0].key_value_change.version == 1
        finally:
            s.cancel()
    finally:
        c.channel.close()


def test_kill_9_loses_no_acknowledged_set_and_subscribers_resume(start_server):
    srv = start_server(name="kvcrash")
    c = Client(make_channel(srv.address))
    acked: dict[str, bytes] = {}
    seen: dict[str, bytes] = {}
    resume = {"token": kv_list(c).feed_token}
    stop = threading.Event()

    def follow():
        s = KVStream(c, from_token(resume["token"]))
        while True:
            try:
                r = s.events.get(timeout=1)
            except queue.Empty:
                if not s.ended.empty():
                    return
                continue
            if r.WhichOneof("event") == "key_value_change":
                seen[r.key_value_change.key] = r.key_value_change.value
            resume["token"] = r.resume_token

    def write(w: Client):
        n = 0
        while not stop.is_set():
            key, value = f"k{n % 50:02d}", f"v{n}".encode()
            try:
                kv_set(w, key, value)
            except grpc.RpcError:
                return
            acked[key] = value
            n += 1

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    w = Client(make_channel(srv.address))
    writer = threading.Thread(target=write, args=(w,), daemon=True)
    writer.start()
    ubiq_harness.wait_until(lambda: len(acked) >= 50 and len(seen) >= 10, 60, message="sets and deliveries under way")
    srv.kill()
    writer.join(30); stop.set()
    follower.join(30)
    c.channel.close(); w.channel.close()

    srv.start()
    c = Client(make_channel(srv.address))
    try:
        stored = {e.key: e.value for e in list_all(c, "")}
        for key, value in acked.items():
            # the last acknowledged value, or one written after it whose answer the kill cut off
            assert key in stored, f"acknowledged key {key} lost"
            assert int(stored[key][1:]) >= int(value[1:]), f"{key}: acknowledged {value!r}, found {stored[key]!r}"
        s = KVStream(c, from_token(resume["token"]))
        try:
            for r in s.caught_up():
                if r.WhichOneof("event") == "key_value_change":
                    seen[r.key_value_change.key] = r.key_value_change.value
        finally:
            s.cancel()
        assert seen == stored, "the subscriber's copy, resumed from its last token, differs from the store"
    finally:
        c.channel.close()


# -- reasons: QUOTA_VIOLATION and ACCOUNT_CHANGE ----------------------------------------------

QUOTA_VIOLATION = ch.KeyValueChange.REASON_QUOTA_VIOLATION
ACCOUNT_CHANGE = ch.KeyValueChange.REASON_ACCOUNT_CHANGE


def test_a_write_refused_for_an_account_quota_tells_the_accounts_subscribers(start_server):
    srv = start_server(args=["--kv-max-keys", "1", "--kv-max-value-bytes", "8"])
    c = Client(make_channel(srv.address))
    other = Client(make_channel(srv.address))
    try:
        s = KVStream(other)
        try:
            s.caught_up()
            token = kv_set(c, "a", b"1", author="dev-a").feed_token
            assert error_of(refused(kv_set, c, "b", b"2", author="dev-a"))[2] == "KEY_VALUE_QUOTA"
            got = [s.next(), s.next()]
            assert [(r.key_value_change.key, r.key_value_change.reason) for r in got] == [("a", SERVER_CHANGE), ("b", QUOTA_VIOLATION)]
            violation = got[1]
            assert violation.key_value_change.author == "dev-a" and violation.key_value_change.version == 0
            assert violation.resume_token == token, "nothing was written: the token stays where it was"
            # a value too long for any account is the writer's business only; the next thing the
            # subscriber sees is the following write
            assert error_of(refused(kv_set, c, "a", b"x" * 9))[2] == "KEY_VALUE_QUOTA"
            kv_set(c, "a", b"3")
            nxt = s.next()
            assert (nxt.key_value_change.key, nxt.key_value_change.reason, nxt.key_value_change.value) == ("a", SERVER_CHANGE, b"3")
        finally:
            s.cancel()
        # nothing of the refused write is stored: resuming from before it replays only "a"
        r = KVStream(other, from_token(token))
        try:
            assert [x.WhichOneof("event") for x in r.caught_up()] == ["key_value_change", "caught_up"]
        finally:
            r.cancel()
    finally:
        c.channel.close()
        other.channel.close()


def test_an_account_over_a_lowered_quota_is_told_when_it_subscribes(start_server):
    srv = start_server(name="kvlowered")
    c = Client(make_channel(srv.address))
    for k in ("a", "b", "c"):
        kv_set(c, k, b"1")
    s = KVStream(c)
    try:
        assert [r.WhichOneof("event") for r in s.caught_up()] == ["caught_up"]  # within its quotas: no notice
    finally:
        s.cancel()
    c.channel.close()
    assert srv.stop() == 0
    srv.extra_args = srv.extra_args + ["--kv-max-keys", "2"]
    srv.start()
    assert "key-value accounts over a quota" in srv.stderr_path.read_text()  # the operator is told at startup
    c = Client(make_channel(srv.address))
    try:
        s = KVStream(c)
        try:
            first = s.caught_up()
            assert [r.WhichOneof("event") for r in first] == ["key_value_change", "caught_up"]
            assert (first[0].key_value_change.key, first[0].key_value_change.reason) == ("", QUOTA_VIOLATION)
        finally:
            s.cancel()
        # over it, the account may still shrink; once within, a new subscriber hears nothing
        kv_delete(c, "c")
        s = KVStream(c)
        try:
            assert [r.WhichOneof("event") for r in s.caught_up()] == ["caught_up"]
        finally:
            s.cancel()
    finally:
        c.channel.close()


def _local_device_with_keys(srv, channel, device: str, keys: dict[str, bytes]):
    from test_local_store import LocalDevice
    phone = LocalDevice(channel, device)
    stub = kvg.KeyValueStub(channel)
    for k, value in keys.items():
        stub.Set(kv.KeyValueSetRequest(key=k, value=value, author=device), metadata=phone.md, timeout=TIMEOUT)
    return phone, stub


def test_first_sign_in_moves_the_devices_local_keys_into_the_account_as_an_account_change(start_server, raw):
    srv = start_server(args=["--local-stores"], name="kvimport")
    channel = raw(srv)
    tenant = Tenant(srv, channel, "family")
    stub = kvg.KeyValueStub(channel)
    stub.Set(kv.KeyValueSetRequest(key="theme", value=b"dark", author="tablet"), metadata=tenant.md, timeout=TIMEOUT)
    phone, _ = _local_device_with_keys(srv, channel, "phone", {"theme": b"light", "seeded": b"1"})
    # the local keys are the device's own: the account does not see them before the sign-in
    assert [e.key for e in stub.List(kv.KeyValueListRequest(), metadata=tenant.md, timeout=TIMEOUT).entries] == ["theme"]
    live = Stream(channel, ch.SubscribeRequest(key_values=ch.KeyValueSubscription()), metadata=tenant.md)
    try:
        assert live.caught_up()[-1].HasField("caught_up")
        signed = tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id="phone", local_device_secret=phone.secret), timeout=60)
        seen: dict[str, ch.SubscribeResponse] = {}

        def both_seen(r: ch.SubscribeResponse) -> bool:
            if r.HasField("key_value_change") or (r.HasField("store_event") and r.store_event.phase == ch.StoreEvent.PHASE_DID_CHANGE):
                seen.setdefault(r.WhichOneof("event"), r)
            return len(seen) == 2

        live.until(both_seen)
        change = seen["key_value_change"].key_value_change
        # the account's value wins for a key both have; the device's other keys move in
        assert (change.key, change.value, change.reason, change.author, change.version) == ("seeded", b"1", ACCOUNT_CHANGE, "phone", 1)
        # the import's DID_CHANGE counts the keys too: one moved, one kept as the account had it
        did = seen["store_event"].store_event
        assert did.transition == ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED and did.phase == ch.StoreEvent.PHASE_DID_CHANGE
        assert (did.import_counts.key_values_moved, did.import_counts.key_values_kept) == (1, 1)
    finally:
        live.cancel()
    # and so does the SignIn (a device with local keys and no local store has an import too)
    assert signed.HasField("local_import")
    assert (signed.local_import.key_values_moved, signed.local_import.key_values_kept) == (1, 1)
    assert (signed.local_import.inserted, signed.local_import.merged) == (0, 0)
    session = bearer(signed.session_token)
    listed = stub.List(kv.KeyValueListRequest(), metadata=session, timeout=TIMEOUT)
    assert {e.key: e.value for e in listed.entries} == {"theme": b"dark", "seeded": b"1"}
    assert (listed.usage.keys, listed.usage.bytes) == (2, 5 + 4 + 6 + 1)
    # a device subscribing from oldest makes its first copy: INITIAL_SYNC, whatever the origin
    sync = Stream(channel, ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": ch.StartPoint(oldest=True)}), metadata=session)
    try:
        got = [r.key_value_change for r in sync.caught_up() if r.HasField("key_value_change")]
        assert sorted((x.key, x.reason) for x in got) == [("seeded", INITIAL_SYNC), ("theme", INITIAL_SYNC)]
    finally:
        sync.cancel()
    # moved, not copied: the local session is gone and a retried SignIn moves nothing again
    retried = tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id="phone", local_device_secret=phone.secret), timeout=60)
    again = stub.List(kv.KeyValueListRequest(), metadata=bearer(retried.session_token), timeout=TIMEOUT)
    assert again.feed_token == listed.feed_token
    assert retried.local_import == signed.local_import


def test_a_local_write_racing_the_first_sign_in_is_refused_never_lost(start_server, raw, monkeypatch):
    """A local Set authenticated just before the import revoked its session, and committing after
    the import moved the local keys, would land in entries nobody reads again. The server's test
    sequence points (UBIQUITYD_TEST_SEQUENCE) put the calls in exactly that order: the write
    passes authentication, the SignIn begins the import and moves the keys, then the write
    commits. It must fail with SESSION_REVOKED and write nothing; written again with the account's
    session it lands in the account."""
    # the device's second Set is the racing one (its first sets "early" before the sign-in)
    monkeypatch.setenv("UBIQUITYD_TEST_SEQUENCE", "kv.set.authorized:2,import.begin,import.kv.moved,kv.set.write:2")
    srv = start_server(args=["--local-stores"], name="kvimport-race")
    monkeypatch.delenv("UBIQUITYD_TEST_SEQUENCE")
    channel = raw(srv)
    tenant = Tenant(srv, channel, "family")
    phone, stub = _local_device_with_keys(srv, channel, "phone", {"early": b"1"})
    late = stub.Set.future(kv.KeyValueSetRequest(key="late", value=b"2", author="phone"), metadata=phone.md, timeout=60)
    signed = tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id="phone", local_device_secret=phone.secret), timeout=60)
    with pytest.raises(grpc.RpcError) as e:
        late.result()
    code, msg, reason, _, _ = error_of(e.value)
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), msg
    assert "nothing was written" in msg and "SignIn" in msg
    session = bearer(signed.session_token)
    listed = stub.List(kv.KeyValueListRequest(), metadata=session, timeout=TIMEOUT)
    assert {x.key: x.value for x in listed.entries} == {"early": b"1"}
    assert (signed.local_import.key_values_moved, signed.local_import.key_values_kept) == (1, 0)
    # the device writes it again as the account: now it is the account's
    assert stub.Set(kv.KeyValueSetRequest(key="late", value=b"2", author="phone"), metadata=session, timeout=TIMEOUT).version == 1
    assert {x.key for x in stub.List(kv.KeyValueListRequest(), metadata=session, timeout=TIMEOUT).entries} == {"early", "late"}


def test_first_sign_in_whose_local_keys_would_exceed_the_accounts_quota_is_refused_and_changes_nothing(start_server, raw):
    srv = start_server(args=["--local-stores", "--kv-max-keys", "2"], name="kvimport-quota")
    channel = raw(srv)
    tenant = Tenant(srv, channel, "family")
    stub = kvg.KeyValueStub(channel)
    for k in ("a", "b"):
        stub.Set(kv.KeyValueSetRequest(key=k, value=b"1"), metadata=tenant.md, timeout=TIMEOUT)
    phone, _ = _local_device_with_keys(srv, channel, "phone", {"a": b"phone", "c": b"phone"})
    err = refused(tenant.accounts.SignIn, ac.SignInRequest(api_key=tenant.api_key, device_id="phone", local_device_secret=phone.secret), timeout=60)
    code, msg, reason, _, _ = error_of(err)
    assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "KEY_VALUE_QUOTA")
    q = details_of(err, kv.KeyValueQuotaDetails)
    assert (q.quota, q.limit, q.used, q.requested) == (kv.KeyValueQuotaDetails.QUOTA_KEYS, 2, 2, 3)  # "a" is kept, "c" would be a third
    assert "local key-value entries" in msg and "sign in again" in msg
    # nothing changed: the account as it was, the device still working locally with its keys
    assert {e.key: e.value for e in stub.List(kv.KeyValueListRequest(), metadata=tenant.md, timeout=TIMEOUT).entries} == {"a": b"1", "b": b"1"}
    local = stub.List(kv.KeyValueListRequest(), metadata=phone.md, timeout=TIMEOUT)
    assert {e.key: e.value for e in local.entries} == {"a": b"phone", "c": b"phone"}
    # room made: the sign-in goes through
    stub.Delete(kv.KeyValueDeleteRequest(key="b"), metadata=tenant.md, timeout=TIMEOUT)
    signed = tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id="phone", local_device_secret=phone.secret), timeout=60)
    after = stub.List(kv.KeyValueListRequest(), metadata=bearer(signed.session_token), timeout=TIMEOUT)
    assert {e.key: e.value for e in after.entries} == {"a": b"1", "c": b"phone"}


# -- tombstone trimming ----------------------------------------------------------------------

def test_trimmed_tombstones_expire_older_tokens_and_a_baseline_recovers(start_server):
    srv = start_server(name="kvtrim")
    c = Client(make_channel(srv.address))
    before = kv_set(c, "a", b"1").feed_token
    kv_set(c, "b", b"2")
    deleted = kv_delete(c, "a")
    assert deleted.version == 2
    current = kv_set(c, "c", b"3").feed_token
    c.channel.close()
    assert srv.stop() == 0
    # a retention shorter than the restart: the startup pass trims the tombstone of "a"
    srv.extra_args = srv.extra_args + ["--kv-tombstone-retention-seconds", "0.001"]
    srv.start()
    c = Client(make_channel(srv.address))
    try:
        # a token from before the trimmed deletion cannot be served gap-free
        with pytest.raises(grpc.RpcError) as e:
            list(c.changes.Subscribe(ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": from_token(before)}),
                                     timeout=TIMEOUT, metadata=c.md))
        code, msg, reason, _, _ = error_of(e.value)
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_EXPIRED")
        assert "List" in msg and "oldest" in msg
        d = details_of(e.value, ch.HistoryExpiredDetails)
        assert d.oldest_retained_token == deleted.feed_token and d.current_token == current
        assert not d.deletions_available
        # from the floor on it is served: nothing after it was trimmed
        s = KVStream(c, from_token(deleted.feed_token))
        try:
            got = [r.key_value_change.key for r in s.caught_up() if r.HasField("key_value_change")]
            assert got == ["c"]
        finally:
            s.cancel()
        # the recovery: a baseline (List), then changes from its feed token
        listed = kv_list(c)
        assert {x.key: x.value for x in listed.entries} == {"b": b"2", "c": b"3"} and listed.feed_token == current
        s = KVStream(c, from_token(listed.feed_token))
        try:
            s.caught_up()
            kv_set(c, "d", b"4")
            # a key new to an account that trimmed starts above every version the trim removed
            assert s.changes(1, "d")[0].key_value_change.version == 3
        finally:
            s.cancel()
        # so the trimmed key set anew starts above its old versions: an expected_version of the
        # deleted incarnation never matches the new one (no ABA)
        assert kv_set(c, "a", b"again").version == 3
        assert error_of(refused(kv_set, c, "a", b"x", precondition=kv.KeyValuePrecondition(expected_version=1)))[2] == "KEY_VERSION_CONFLICT"
    finally:
        c.channel.close()
