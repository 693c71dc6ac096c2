"""The per-connection session memo (docs/accounts.md "Per call"): a connection's calls that carry
an `authorization` value it memoised (one per session it carries, up to a bound) skip the token's
hash and lookup while nothing changed. Every way a session ends must still reach the very next
call on the same connection, whichever way the method runs (a task: ListStores; a blocking
worker: GetObjects, KeyValue.Get), and one connection carrying several sessions must act for each
one's own account.

Raw channels (as in test_accounts.py): one channel is one TCP connection (`CHANNEL_OPTIONS`), and
each call carries exactly the credentials under test.
"""

from __future__ import annotations

import grpc

from test_accounts import Tenant, bearer, failure, raw, reason_of  # noqa: F401 (raw: fixture)
from test_account_lifecycle import Lifecycle
from ubiq_client import st
from ubiquity.v1 import accounts_pb2 as ac, changes_pb2 as ch, keyvalue_pb2 as kv, keyvalue_pb2_grpc as kvg


def warm(t: Tenant, channel, sid: str, oid: str) -> None:
    """Calls of each execution kind, twice: the second of each is answered from the memo."""
    kvs = kvg.KeyValueStub(channel)
    for _ in range(2):
        assert [s.store_id for s in t.stores.ListStores(st.ListStoresRequest(), metadata=t.md, timeout=30).stores] == [sid]
        assert len(t.stores.GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=[oid]), metadata=t.md, timeout=30).objects) == 1
        kvs.Get(kv.KeyValueGetRequest(key="k"), metadata=t.md, timeout=30)


def refused(t: Tenant, channel, sid: str, oid: str) -> set[tuple[grpc.StatusCode, str | None]]:
    """What each execution kind answers now, on the same connection."""
    calls = [lambda: t.stores.ListStores(st.ListStoresRequest(), metadata=t.md, timeout=30),
             lambda: t.stores.GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=[oid]), metadata=t.md, timeout=30),
             lambda: kvg.KeyValueStub(channel).Get(kv.KeyValueGetRequest(key="k"), metadata=t.md, timeout=30)]
    return {(e.code(), reason_of(e)) for e in (failure(c) for c in calls)}


def tenant(srv, channel, name: str = "t") -> tuple[Tenant, str, str]:
    t = Tenant(srv, channel, name)
    sid, oids = t.store_with_data()
    kvg.KeyValueStub(channel).Set(kv.KeyValueSetRequest(key="k", value=b"v"), metadata=t.md, timeout=30)
    warm(t, channel, sid, oids[0])
    return t, sid, oids[0]


REVOKED = {(grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED")}


def test_sign_out_reaches_the_next_call_on_the_same_connection(start_server, raw):
    srv = start_server(name="memo-sign-out")
    c = raw(srv)
    t, sid, oid = tenant(srv, c)
    t.accounts.SignOut(ac.SignOutRequest(), metadata=t.md, timeout=30)
    assert refused(t, c, sid, oid) == REVOKED
    # a new session on the same connection works at once
    t.token = t.sign_in()
    warm(t, c, sid, oid)


def test_key_revocation_reaches_the_next_call_on_the_same_connection(start_server, raw):
    srv = start_server(name="memo-revoke-key")
    c = raw(srv)
    t, sid, oid = tenant(srv, c)
    t.accounts.RevokeApiKey(ac.RevokeApiKeyRequest(key_id=t.key_id), metadata=t.ops, timeout=30)
    assert refused(t, c, sid, oid) == REVOKED


def test_archive_and_delete_reach_the_next_call_on_the_same_connection(start_server, raw):
    srv = start_server(name="memo-archive")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    t, sid, oid = tenant(srv, c, "archived")
    ops.archive(t.account_id)
    # an archived account's session answers as a token no server issued
    assert refused(t, c, sid, oid) == {(grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS")}
    ops.restore(t.account_id)
    assert refused(t, c, sid, oid) == {(grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS")}, "ended at archive, stays ended"

    d, dsid, doid = tenant(srv, c, "deleted")
    ops.delete(d.account_id)
    assert refused(d, c, dsid, doid) == {(grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS")}


def test_expiry_reaches_the_next_call_on_the_same_connection(start_server, raw):
    srv = start_server(["--session-lifetime-seconds", "3", "--feed-progress-interval-ms", "100"], name="memo-expiry")
    c = raw(srv)
    t, sid, oid = tenant(srv, c)
    # the subscription ends by itself once the session expires: wait for that event, not for a time
    stream = t.changes.Subscribe(ch.SubscribeRequest(store_id=sid, **{"from": ch.StartPoint(now=True)}), metadata=t.md)
    e = failure(lambda: list(stream))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_EXPIRED"), e
    assert refused(t, c, sid, oid) == {(grpc.StatusCode.UNAUTHENTICATED, "SESSION_EXPIRED")}


def test_sessions_taking_turns_on_one_connection_each_act_for_their_own_account(start_server, raw):
    srv = start_server(name="memo-turns")
    c = raw(srv)
    a, a_sid, a_oid = tenant(srv, c, "a")
    b, b_sid, b_oid = tenant(srv, c, "b")
    for _ in range(3):
        warm(a, c, a_sid, a_oid)
        warm(b, c, b_sid, b_oid)
    # another account's object through the memoised session: as if it did not exist
    e = failure(b.stores.GetObjects, st.GetObjectsRequest(store_id=a_sid, object_ids=[a_oid]), metadata=b.md, timeout=30)
    assert e.code() == grpc.StatusCode.NOT_FOUND, e
    # a value one character off the memoised one is looked up, and is no session
    off = b.token[:-1] + ("A" if b.token[-1] != "A" else "B")
    e = failure(b.stores.ListStores, st.ListStoresRequest(), metadata=bearer(off), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS"), e
    e = failure(b.stores.ListStores, st.ListStoresRequest(), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "MISSING_CREDENTIALS"), e


def test_one_of_many_sessions_on_one_connection_ended_is_refused_at_once_and_the_others_keep_working(start_server, raw):
    """A gateway's shape: many sessions taking turns on one connection, each memoised; a sign-out
    and a key revocation among them reach those sessions' very next calls, and only theirs."""
    srv = start_server(name="memo-many")
    c = raw(srv)
    tenants = [tenant(srv, c, f"t{i}") for i in range(6)]
    for _ in range(2):
        for t, sid, oid in tenants:
            warm(t, c, sid, oid)
    (out, out_sid, out_oid), (revoked, revoked_sid, revoked_oid) = tenants[2], tenants[4]
    out.accounts.SignOut(ac.SignOutRequest(), metadata=out.md, timeout=30)
    assert refused(out, c, out_sid, out_oid) == REVOKED
    revoked.accounts.RevokeApiKey(ac.RevokeApiKeyRequest(key_id=revoked.key_id), metadata=revoked.ops, timeout=30)
    assert refused(revoked, c, revoked_sid, revoked_oid) == REVOKED
    for _ in range(2):
        for t, sid, oid in tenants:
            if t in (out, revoked):
                assert refused(t, c, sid, oid) == REVOKED
            else:
                warm(t, c, sid, oid)


def test_a_read_only_session_from_the_memo_still_cannot_write(start_server, raw):
    srv = start_server(name="memo-read-only")
    c = raw(srv)
    t, sid, oid = tenant(srv, c)
    ro = t.accounts.CreateApiKey(ac.CreateApiKeyRequest(account_id=t.account_id, scope=ac.API_KEY_SCOPE_READ_ONLY),
                                 metadata=t.ops, timeout=30).secret
    t.api_key, t.token = ro, None
    t.token = t.sign_in("reader")
    warm(t, c, sid, oid)
    e = failure(kvg.KeyValueStub(c).Set, kv.KeyValueSetRequest(key="k", value=b"w"), metadata=t.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.PERMISSION_DENIED, "SCOPE_EXCEEDED"), e
