"""ArchiveAccount, RestoreAccount and DeleteAccount against a real ubiquityd (docs/accounts.md
"Archive, restore, delete"): an archived account answers as an unknown one and comes back byte
for byte; a deleted one leaves nothing readable and nothing on disk; bad input changes nothing.

Raw channels, like test_accounts.py: each call carries exactly the credentials under test.
"""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from pathlib import Path

import grpc
import pytest

from test_accounts import Tenant, _call, _methods, _shape, bearer, failure, raw, reason_of, resume_details  # noqa: F401 (raw: fixture)
from test_lifecycle_transitions import DID, WILL, _context_with_a_pending_insert, _ending, _event, _kv_stream, _subscribe
from ubiq_client import cx, st
from ubiq_harness import find_server_binary
from ubiquity.v1 import accounts_pb2 as ac, changes_pb2 as ch, keyvalue_pb2 as kv, keyvalue_pb2_grpc as kvg

UNKNOWN_TOKEN = "ubs_" + "Q" * 43


class Lifecycle:
    """The three operator calls, with the operator key."""

    def __init__(self, srv, channel):
        self.stub = Tenant.__init__.__globals__["acg"].AccountsStub(channel)
        self.ops = bearer(srv.operator_key)

    def archive(self, account_id, **kw):
        return self.stub.ArchiveAccount(ac.ArchiveAccountRequest(account_id=account_id), metadata=kw.get("md", self.ops), timeout=60)

    def restore(self, account_id, **kw):
        return self.stub.RestoreAccount(ac.RestoreAccountRequest(account_id=account_id), metadata=kw.get("md", self.ops), timeout=60)

    def delete(self, account_id, **kw):
        return self.stub.DeleteAccount(ac.DeleteAccountRequest(account_id=account_id), metadata=kw.get("md", self.ops), timeout=60)

    def get(self, account_id):
        return self.stub.GetAccount(ac.GetAccountRequest(account_id=account_id), metadata=self.ops, timeout=30)


def populated(srv, channel, name: str, stores: int = 2, keys: int = 3) -> tuple[Tenant, dict]:
    """An account with `stores` stores of data, `keys` key-value entries and an open context;
    returns it and what it holds, read back (baselines serialized deterministically)."""
    t = Tenant(srv, channel, name)
    t.kv = kvg.KeyValueStub(channel)
    sids = [t.store_with_data(f"{name}-store-{i}")[0] for i in range(stores)]
    for i in range(keys):
        t.kv.Set(kv.KeyValueSetRequest(key=f"{name}-key-{i}", value=f"{name}-value-{i}".encode()), metadata=t.md, timeout=30)
    t.contexts.CreateContext(cx.CreateContextRequest(store_id=sids[0], name="pending"), metadata=t.md, timeout=30)
    return t, snapshot(t, sids)


def snapshot(t: Tenant, sids: list[str]) -> dict:
    entries = t.kv.List(kv.KeyValueListRequest(), metadata=t.md, timeout=30).entries
    return {"stores": {sid: t.baseline(sid) for sid in sids}, "kv": [(e.key, e.value, e.version) for e in entries]}


REMOVED, ADDED = ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED, ch.StoreEvent.TRANSITION_ACCOUNT_ADDED
# what a store's feed holds after an archive and a restore (docs/lifecycle.md): both announced,
# nothing cancelled
ARCHIVED_AND_RESTORED = [(WILL, REMOVED, False), (DID, REMOVED, False), (WILL, ADDED, False), (DID, ADDED, False)]


def replay(channel, sid: str, session: str, since: bytes) -> list:
    """Everything a device resuming from `since` gets, up to its caught-up marker (excluded)."""
    s = _subscribe(channel, sid, session, token=since)
    got = s.caught_up()[:-1]
    s.cancel()
    return got


def announced(messages: list) -> list[tuple[int, int, bool]]:
    """The messages as (phase, transition, cancelled); every one must be a store event."""
    assert all(m.HasField("store_event") for m in messages), messages
    return [(m.store_event.phase, m.store_event.transition, m.store_event.cancelled) for m in messages]


def with_token(chunk: bytes, token: bytes) -> bytes:
    c = st.BaselineChunk.FromString(chunk)
    c.token = token
    return c.SerializeToString(deterministic=True)


def assert_back_as_before(channel, t: Tenant, before: dict, events=ARCHIVED_AND_RESTORED) -> None:
    """Exact, store by store: resuming from the token of `before`'s baseline replays `events` and
    nothing else — no transaction — and the baseline now is `before`'s byte for byte but for its
    token, which is the last event's (an event is a history row: it takes a generation, changes
    no object)."""
    stores = {}
    for sid, chunks in before["stores"].items():
        got = replay(channel, sid, t.token, st.BaselineChunk.FromString(chunks[0]).token)
        assert announced(got) == events, (sid, announced(got))
        stores[sid] = [with_token(c, got[-1].resume_token) for c in chunks] if got else chunks
    assert snapshot(t, list(before["stores"])) == {"stores": stores, "kv": before["kv"]}


def files_of(srv, account_id: str) -> dict[str, list[str]]:
    base = srv.data_dir / "accounts" / account_id
    return {d: sorted(p.name for p in (base / d).glob("*.sqlite")) for d in ("stores", "archive")}


def unknown_key_of(api_key: str) -> str:
    """A well-formed API key no server issued (another key ID, so its failed sign-ins count apart)."""
    return "ubk_" + uuid.uuid4().hex[:16] + api_key[api_key.index("."):]


def assert_answers_as_unknown(channel, t: Tenant, sids: list[str], other: Tenant):
    """Every data RPC with the account's old session answers exactly as with a token no server
    issued; sign-in with its key exactly as with an unknown key; another account's calls on its
    store IDs exactly as on IDs that never existed."""
    fields = {"store_id": sids[0], "source_store_id": sids[0], "key": "k"}
    checked = 0
    for service, m in _methods():
        got = _shape(_call(channel, service, m, fields, t.md), *sids)
        want = _shape(_call(channel, service, m, fields, bearer(UNKNOWN_TOKEN)), *sids)
        assert got == want, f"{service}/{m.name}: archived/deleted account's session {got} vs unknown {want}"
        assert got[0] == grpc.StatusCode.UNAUTHENTICATED, got
        checked += 1
    assert checked >= 30, checked
    got = _shape(failure(t.accounts.SignIn, ac.SignInRequest(api_key=t.api_key, device_id="d"), timeout=30))
    want = _shape(failure(t.accounts.SignIn, ac.SignInRequest(api_key=unknown_key_of(t.api_key), device_id="d"), timeout=30))
    assert got == want and got[0] == grpc.StatusCode.UNAUTHENTICATED, (got, want)
    missing = str(uuid.uuid4())
    for method, req in [("CurrentGeneration", lambda s: st.CurrentGenerationRequest(store_id=s)),
                        ("ExportBaseline", lambda s: st.ExportBaselineRequest(store_id=s)),
                        ("DestroyStore", lambda s: st.DestroyStoreRequest(store_id=s))]:
        call = getattr(other.stores, method)
        got = _shape(failure(call, req(sids[0]), metadata=other.md, timeout=30), sids[0])
        want = _shape(failure(call, req(missing), metadata=other.md, timeout=30), missing)
        assert got == want and got[0] == grpc.StatusCode.NOT_FOUND, (method, got, want)


def test_archive_hides_the_account_and_restore_brings_it_back_byte_for_byte(start_server, raw):
    srv = start_server(name="lifecycle-archive")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    a, before = populated(srv, c, "A")
    b, b_before = populated(srv, c, "B", stores=1, keys=1)
    second_device = a.sign_in("device-2")
    sids = list(before["stores"])
    assert files_of(srv, a.account_id) == {"stores": sorted(f"{s}.sqlite" for s in sids), "archive": []}

    archived = ops.archive(a.account_id)
    assert archived.state == ac.ACCOUNT_STATE_ARCHIVED and archived.account_id == a.account_id
    assert ops.get(a.account_id).state == ac.ACCOUNT_STATE_ARCHIVED
    listed = {x.account_id: x.state for x in ops.stub.ListAccounts(ac.ListAccountsRequest(), metadata=ops.ops, timeout=30).accounts}
    assert listed[a.account_id] == ac.ACCOUNT_STATE_ARCHIVED and listed[b.account_id] == ac.ACCOUNT_STATE_ACTIVE
    # the files moved whole (closed first) into the archive; nothing stays where stores are served
    assert files_of(srv, a.account_id) == {"stores": [], "archive": sorted(f"{s}.sqlite" for s in sids)}
    assert_answers_as_unknown(c, a, sids, b)
    a.token = second_device
    assert_answers_as_unknown(c, a, sids, b)
    # B never noticed
    assert snapshot(b, list(b_before["stores"])) == b_before

    restored = ops.restore(a.account_id)
    assert restored.state == ac.ACCOUNT_STATE_ACTIVE
    assert files_of(srv, a.account_id) == {"stores": sorted(f"{s}.sqlite" for s in sids), "archive": []}
    # sessions ended at archive stay ended; the key signs in again
    for old in (second_device,):
        e = failure(a.stores.ListStores, st.ListStoresRequest(), metadata=bearer(old), timeout=30)
        assert e.code() == grpc.StatusCode.UNAUTHENTICATED
    a.token = a.sign_in("device-3")
    assert_back_as_before(c, a, before)
    listed = {s.store_id for s in a.stores.ListStores(st.ListStoresRequest(), metadata=a.md, timeout=30).stores}
    assert listed == set(sids)
    # and it serves writes again
    a.store_with_data("after-restore")


def test_delete_removes_everything_and_returns_a_receipt(start_server, raw):
    srv = start_server(name="lifecycle-delete")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    a, before = populated(srv, c, "A", stores=3, keys=4)
    a.accounts.CreateApiKey(ac.CreateApiKeyRequest(account_id=a.account_id, scope=ac.API_KEY_SCOPE_READ_ONLY),
                            metadata=ops.ops, timeout=30)
    a.sign_in("device-2")  # two sessions now
    b, b_before = populated(srv, c, "B", stores=1, keys=1)
    sids = list(before["stores"])
    on_disk = sum(p.stat().st_size for p in (srv.data_dir / "accounts" / a.account_id).rglob("*") if p.is_file())

    receipt = ops.delete(a.account_id)
    assert (receipt.stores_removed, receipt.archived_stores_removed, receipt.key_value_entries_removed,
            receipt.api_keys_removed, receipt.sessions_removed) == (3, 0, 4, 2, 2), receipt
    assert receipt.bytes_removed >= on_disk > 0, (receipt.bytes_removed, on_disk)

    e = failure(ops.get, a.account_id)
    assert e.code() == grpc.StatusCode.NOT_FOUND
    listed = {x.account_id for x in ops.stub.ListAccounts(ac.ListAccountsRequest(), metadata=ops.ops, timeout=30).accounts}
    assert a.account_id not in listed and b.account_id in listed
    assert_answers_as_unknown(c, a, sids, b)
    # a second delete, an archive, a restore: as for an account that never existed
    for call in (ops.delete, ops.archive, ops.restore):
        got = _shape(failure(call, a.account_id), a.account_id)
        want = _shape(failure(call, str(uuid.uuid4())), *[])
        assert got[0] == grpc.StatusCode.NOT_FOUND and got[:2] == want[:2], (got, want)
    assert snapshot(b, list(b_before["stores"])) == b_before

    # nothing of A on disk: no folder, and neither its ID nor its names nor its values in any file
    assert not (srv.data_dir / "accounts" / a.account_id).exists()
    needles = [a.account_id.encode(), b"A-store-0", b"A-key-1", b"A-value-2"]
    for p in srv.data_dir.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            for n in needles:
                assert n not in data, f"{n!r} still in {p}"


def test_delete_of_an_archived_account_counts_its_archive(start_server, raw):
    srv = start_server(name="lifecycle-delete-archived")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    a, before = populated(srv, c, "A", stores=2, keys=1)
    ops.archive(a.account_id)
    receipt = ops.delete(a.account_id)
    assert (receipt.stores_removed, receipt.archived_stores_removed, receipt.key_value_entries_removed,
            receipt.api_keys_removed) == (0, 2, 1, 1), receipt
    assert receipt.sessions_removed == 0  # the archive removed them already
    assert not (srv.data_dir / "accounts" / a.account_id).exists()
    assert failure(ops.get, a.account_id).code() == grpc.StatusCode.NOT_FOUND


def test_bad_input_gets_a_clear_status_and_changes_nothing(start_server, raw):
    srv = start_server(name="lifecycle-bad")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    a, before = populated(srv, c, "A", stores=1, keys=1)
    sids = list(before["stores"])

    def refused(call, account_id, code, reason, md=None):
        e = failure(call, account_id, **({"md": md} if md is not None else {}))
        assert (e.code(), reason_of(e)) == (code, reason), (call.__name__, account_id, e.code(), reason_of(e), e.details())
        assert e.details(), "a message says what to do"
        return e

    for call in (ops.archive, ops.restore, ops.delete):
        refused(call, str(uuid.uuid4()), grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
        refused(call, "", grpc.StatusCode.INVALID_ARGUMENT, "MISSING_FIELD")
        refused(call, a.account_id, grpc.StatusCode.UNAUTHENTICATED, "MISSING_CREDENTIALS", md=[])
        refused(call, a.account_id, grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS", md=a.md)  # a session is no operator
    refused(ops.archive, "default", grpc.StatusCode.FAILED_PRECONDITION, "DEFAULT_ACCOUNT")
    refused(ops.delete, "default", grpc.StatusCode.FAILED_PRECONDITION, "DEFAULT_ACCOUNT")
    refused(ops.restore, "default", grpc.StatusCode.ALREADY_EXISTS, "ACCOUNT_NOT_ARCHIVED")
    e = refused(ops.restore, a.account_id, grpc.StatusCode.ALREADY_EXISTS, "ACCOUNT_NOT_ARCHIVED")
    assert "active" in e.details()
    # nothing changed: still active, still serving the same data to the same session
    assert ops.get(a.account_id).state == ac.ACCOUNT_STATE_ACTIVE
    assert snapshot(a, sids) == before

    ops.archive(a.account_id)
    refused(ops.archive, a.account_id, grpc.StatusCode.FAILED_PRECONDITION, "ACCOUNT_ARCHIVED")
    assert ops.get(a.account_id).state == ac.ACCOUNT_STATE_ARCHIVED
    assert files_of(srv, a.account_id) == {"stores": [], "archive": [f"{sids[0]}.sqlite"]}
    ops.restore(a.account_id)
    a.token = a.sign_in("again")
    assert_back_as_before(c, a, before)


@pytest.mark.parametrize("first,second", [("archive", "archive"), ("archive", "delete"), ("delete", "archive")])
def test_concurrent_transitions_on_one_account_one_wins_the_rest_change_nothing(start_server, raw, first, second):
    """Calls racing on one account: exactly one of each kind's outcome is a success, every other
    is FAILED_PRECONDITION with a lifecycle reason (or NOT_FOUND once a deletion began), and the
    account ends in the state of what succeeded, whole."""
    srv = start_server(name=f"lifecycle-race-{first}-{second}")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    a, before = populated(srv, c, "A", stores=6, keys=1)
    sids = list(before["stores"])
    calls = [first, second] * 4
    results: list = [None] * len(calls)
    go = threading.Barrier(len(calls))

    def run(i):
        go.wait()
        try:
            results[i] = ("OK", getattr(ops, calls[i])(a.account_id))
        except grpc.RpcError as e:
            results[i] = (e.code(), reason_of(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [calls[i] for i, r in enumerate(results) if r[0] == "OK"]
    assert 1 <= len(ok) <= 2, results
    for r in results:
        if r[0] != "OK":
            assert r in {(grpc.StatusCode.FAILED_PRECONDITION, "ACCOUNT_BUSY"),
                         (grpc.StatusCode.FAILED_PRECONDITION, "ACCOUNT_ARCHIVED"),
                         (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")}, results
    assert ok.count("archive") <= 1 and ok.count("delete") <= 1, results
    if "delete" in ok:
        assert failure(ops.get, a.account_id).code() == grpc.StatusCode.NOT_FOUND
        assert not (srv.data_dir / "accounts" / a.account_id).exists()
    else:
        assert ops.get(a.account_id).state == ac.ACCOUNT_STATE_ARCHIVED
        assert files_of(srv, a.account_id) == {"stores": [], "archive": sorted(f"{s}.sqlite" for s in sids)}
        ops.restore(a.account_id)
        a.token = a.sign_in("after")
        assert_back_as_before(c, a, before)


def test_ubiq_account_archive_restore_delete(start_server, raw):
    srv = start_server(name="lifecycle-cli")
    c = raw(srv)
    a, before = populated(srv, c, "A", stores=1, keys=2)
    binary = Path(find_server_binary()).parent / "ubiq"

    def ubiq(*args, ok=True):
        env = dict(os.environ, UBIQ_SERVER=srv.address, UBIQ_DATA_DIR=str(srv.data_dir))
        env.pop("UBIQ_TOKEN", None)
        r = subprocess.run([str(binary), "account", *args], env=env, capture_output=True, text=True, timeout=60)
        assert (r.returncode == 0) == ok, (args, r.returncode, r.stdout, r.stderr)
        return r.stdout + r.stderr

    assert "archived" in ubiq("archive", a.account_id)
    assert "ACCOUNT_ARCHIVED" in ubiq("archive", a.account_id, ok=False) or "archived already" in ubiq("archive", a.account_id, ok=False)
    assert "active" in ubiq("restore", a.account_id)
    assert "--yes" in ubiq("delete", a.account_id, ok=False)
    out = ubiq("delete", a.account_id, "--yes")
    assert "1 stores" in out and "2 key-value entries" in out and "1 API keys" in out, out
    assert not (srv.data_dir / "accounts" / a.account_id).exists()


def two_devices(srv, c):
    """An account with a store of data and two devices (sessions), each subscribed to the store;
    device 2 also follows the key-value store, device 1 has a context with a pending insert
    (named "one"). Returns the tenant, the store, the sessions, the subscriptions, the key-value
    stream and the context."""
    a = Tenant(srv, c, "A")
    sid, _ = a.store_with_data()
    one, two = a.token, a.sign_in("device-2")
    subs = [_subscribe(c, sid, one), _subscribe(c, sid, two)]
    assert all(s.next().HasField("caught_up") for s in subs)
    kv_stream, _ = _kv_stream(a, c, two)
    return a, sid, (one, two), subs, kv_stream, _context_with_a_pending_insert(a, sid, one, "one")


def test_delete_announces_content_removed_to_every_device_with_a_chance_to_save_then_ends_their_streams(start_server, raw):
    srv = start_server(name="lifecycle-delete-announced")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    a, sid, (one, two), subs, kv_stream, ctx = two_devices(srv, c)

    deleting = ops.stub.DeleteAccount.future(ac.DeleteAccountRequest(account_id=a.account_id), metadata=ops.ops, timeout=60)
    # every device hears it first, on its store subscriptions and its key-value stream
    for s in subs:
        assert _event(s.next()) == (WILL, ch.StoreEvent.TRANSITION_CONTENT_REMOVED)
    assert _event(next(kv_stream)) == (WILL, ch.StoreEvent.TRANSITION_CONTENT_REMOVED)
    # the chance to save: the context still answers with its session until it has nothing left
    a.contexts.Save(cx.ContextSaveRequest(context_id=ctx), metadata=bearer(one), timeout=30)
    assert deleting.result().stores_removed == 1

    # then the streams end (no DID_CHANGE: its stores are gone) with their sessions removed
    for s in subs:
        e = _ending(s)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    e = failure(lambda: list(kv_stream))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    e = failure(ops.get, a.account_id)
    assert e.code() == grpc.StatusCode.NOT_FOUND


def test_archive_announces_account_removed_to_every_device_and_restore_says_the_stores_are_back(start_server, raw):
    srv = start_server(name="lifecycle-archive-announced")
    c = raw(srv)
    ops = Lifecycle(srv, c)
    a, sid, (one, two), subs, kv_stream, ctx = two_devices(srv, c)

    archiving = ops.stub.ArchiveAccount.future(ac.ArchiveAccountRequest(account_id=a.account_id), metadata=ops.ops, timeout=60)
    # every device hears it before the stores close, on its subscriptions and key-value stream
    wills = [s.next() for s in subs]
    assert all(_event(w) == (WILL, REMOVED) for w in wills), wills
    assert _event(next(kv_stream)) == (WILL, REMOVED)
    # the chance to save: the context still works with its session, and what it saves is kept
    saved = a.contexts.Save(cx.ContextSaveRequest(context_id=ctx), metadata=bearer(one), timeout=30)
    [saved_id] = saved.result.permanent_ids.values()
    assert archiving.result().state == ac.ACCOUNT_STATE_ARCHIVED

    # then "it happened", written while the stores were still open, and the streams end after it
    dids = []
    for s in subs:
        tx, did = s.next(), s.next()
        assert [x.context_name for x in tx.transactions.transactions] == ["one"], tx
        assert _event(did) == (DID, REMOVED) and not did.store_event.cancelled, did
        e = _ending(s)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
        assert resume_details(e).resume_token == did.resume_token
        dids.append(did)
    assert _event(next(kv_stream)) == (DID, REMOVED)
    e = failure(lambda: list(kv_stream))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e

    # restore: nobody follows an archived account, so the stores say it when they are back — a
    # device resuming from the archive's DID_CHANGE replays WILL_CHANGE then DID_CHANGE(ACCOUNT_ADDED)
    ops.restore(a.account_id)
    back = a.sign_in("device-1")
    got = replay(c, sid, back, dids[0].resume_token)
    assert announced(got) == ARCHIVED_AND_RESTORED[2:], announced(got)
    objects = a.stores.GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=[saved_id]), metadata=bearer(back), timeout=30)
    assert objects.objects[0].values["name"].string_value == "one", "the change saved in the window came back with the store"
