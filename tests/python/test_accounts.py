"""Accounts, API keys, sessions and tenant isolation against a real ubiquityd (docs/accounts.md).

These tests build raw channels on purpose: the suite's `make_channel` adds the default
account's session to every call, and here each call carries exactly the credentials under test.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import uuid

import grpc
import pytest
from google.protobuf import message_factory
from google.rpc import error_details_pb2
from grpc_status import rpc_status

import ubiq_harness
from conftest import CHANNEL_OPTIONS
from ubiq_client import cx, md, ob, person_model, st, v
from ubiquity.v1 import (
    accounts_pb2 as ac,
    accounts_pb2_grpc as acg,
    changes_pb2 as ch,
    changes_pb2_grpc as chg,
    contexts_pb2_grpc as cxg,
    keyvalue_pb2 as kv,
    keyvalue_pb2_grpc as kvg,
    models_pb2_grpc as mdg,
    stores_pb2_grpc as stg,
)

DATA_SERVICES = ["ubiquity.v1.Stores", "ubiquity.v1.Contexts", "ubiquity.v1.Models", "ubiquity.v1.Changes", "ubiquity.v1.KeyValue"]


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def reason_of(err: grpc.RpcError) -> str | None:
    status = rpc_status.from_call(err)
    for d in status.details if status else ():
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            return info.reason
    return None


def resume_details(err: grpc.RpcError) -> ch.ResumeDetails | None:
    status = rpc_status.from_call(err)
    for d in status.details if status else ():
        if d.Is(ch.ResumeDetails.DESCRIPTOR):
            r = ch.ResumeDetails()
            d.Unpack(r)
            return r
    return None


def failure(fn, *args, **kw) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        r = fn(*args, **kw)
        if hasattr(r, "__iter__") and not hasattr(r, "SerializeToString"):
            list(r)
    return e.value


class Tenant:
    """An account with a read-write key and a session, all made with the operator key."""

    def __init__(self, srv: ubiq_harness.Ubiquityd, channel: grpc.Channel, name: str, account_id: str | None = None,
                 scope=ac.API_KEY_SCOPE_READ_WRITE, store_name: str = ""):
        self.ops = bearer(srv.operator_key)
        self.accounts = acg.AccountsStub(channel)
        self.account_id = account_id or self.accounts.CreateAccount(
            ac.CreateAccountRequest(display_name=name), metadata=self.ops, timeout=30).account_id
        created = self.accounts.CreateApiKey(ac.CreateApiKeyRequest(
            account_id=self.account_id, scope=scope, store_name=store_name), metadata=self.ops, timeout=30)
        self.key_id, self.api_key = created.key.key_id, created.secret
        self.token = self.sign_in()
        self.stores = stg.StoresStub(channel)
        self.models = mdg.ModelsStub(channel)
        self.contexts = cxg.ContextsStub(channel)
        self.changes = chg.ChangesStub(channel)

    def sign_in(self, device: str = "device-1") -> str:
        return self.accounts.SignIn(ac.SignInRequest(api_key=self.api_key, device_id=device), timeout=30).session_token

    @property
    def md(self) -> list[tuple[str, str]]:
        return bearer(self.token)

    def store_with_data(self, name: str = "notes") -> tuple[str, list[str]]:
        sid = self.stores.OpenStore(st.OpenStoreRequest(name=name), metadata=self.md, timeout=30).store.store_id
        self.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model()), metadata=self.md, timeout=60)
        r = self.stores.Save(st.SaveRequest(store_id=sid, inserts=[
            ob.Insert(temporary_id="a", entity="Person", values={"name": v("Ann"), "age": v(31, kind="int32")}),
            ob.Insert(temporary_id="b", entity="Person", values={"name": v("Bob"), "age": v(40, kind="int32")}),
        ]), metadata=self.md, timeout=30)
        return sid, [r.permanent_ids["a"], r.permanent_ids["b"]]

    def baseline(self, sid: str) -> list[bytes]:
        # deterministic: map entries (object values) otherwise serialize in hash order, run to run
        return [c.SerializeToString(deterministic=True) for c in self.stores.ExportBaseline(
            st.ExportBaselineRequest(store_id=sid), metadata=self.md, timeout=30)]


@pytest.fixture
def raw():
    """Opens raw channels (no credentials added) and closes them at the end."""
    opened: list[grpc.Channel] = []

    def open_(srv: ubiq_harness.Ubiquityd) -> grpc.Channel:
        c = grpc.insecure_channel(srv.address, options=CHANNEL_OPTIONS)
        grpc.channel_ready_future(c).result(timeout=15)
        opened.append(c)
        return c

    yield open_
    for c in opened:
        c.close()


# -- every Accounts RPC, good and bad input --------------------------------------------------------

def test_operator_rpcs_need_the_operator_key(start_server, raw):
    srv = start_server(name="accounts-ops")
    stub = acg.AccountsStub(raw(srv))
    ops = bearer(srv.operator_key)
    mode = stat.S_IMODE(os.stat(srv.data_dir / "operator.key").st_mode)
    assert mode == 0o600, oct(mode)

    a = stub.CreateAccount(ac.CreateAccountRequest(display_name="Acme"), metadata=ops, timeout=30)
    assert uuid.UUID(a.account_id) and a.display_name == "Acme" and a.state == ac.ACCOUNT_STATE_ACTIVE
    assert stub.GetAccount(ac.GetAccountRequest(account_id=a.account_id), metadata=ops, timeout=30) == a
    listed = [x.account_id for x in stub.ListAccounts(ac.ListAccountsRequest(), metadata=ops, timeout=30).accounts]
    assert "default" in listed and a.account_id in listed

    for call, req in [(stub.CreateAccount, ac.CreateAccountRequest()), (stub.ListAccounts, ac.ListAccountsRequest()),
                      (stub.GetAccount, ac.GetAccountRequest(account_id=a.account_id)),
                      (stub.CreateApiKey, ac.CreateApiKeyRequest(account_id=a.account_id, scope=ac.API_KEY_SCOPE_READ_ONLY)),
                      (stub.RevokeApiKey, ac.RevokeApiKeyRequest(key_id="0123456789abcdef"))]:
        e = failure(call, req, timeout=30)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "MISSING_CREDENTIALS"), e
        for wrong in [srv.operator_key + "x", srv.token, "not a bearer"]:
            e = failure(call, req, metadata=[("authorization", wrong if wrong == "not a bearer" else f"Bearer {wrong}")], timeout=30)
            assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS"), e
    assert len(stub.ListAccounts(ac.ListAccountsRequest(), metadata=ops, timeout=30).accounts) == 2, "nothing was created"

    e = failure(stub.CreateAccount, ac.CreateAccountRequest(display_name="bad\nname"), metadata=ops, timeout=30)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "display_name" in e.details()
    e = failure(stub.GetAccount, ac.GetAccountRequest(account_id=str(uuid.uuid4())), metadata=ops, timeout=30)
    assert e.code() == grpc.StatusCode.NOT_FOUND
    e = failure(stub.CreateApiKey, ac.CreateApiKeyRequest(account_id=a.account_id), metadata=ops, timeout=30)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "scope" in e.details()
    e = failure(stub.CreateApiKey, ac.CreateApiKeyRequest(account_id=a.account_id, scope=ac.API_KEY_SCOPE_ONE_STORE),
                metadata=ops, timeout=30)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "store_name" in e.details()
    e = failure(stub.CreateApiKey, ac.CreateApiKeyRequest(account_id=str(uuid.uuid4()), scope=ac.API_KEY_SCOPE_READ_WRITE),
                metadata=ops, timeout=30)
    assert e.code() == grpc.StatusCode.NOT_FOUND
    e = failure(stub.RevokeApiKey, ac.RevokeApiKeyRequest(key_id="0123456789abcdef"), metadata=ops, timeout=30)
    assert e.code() == grpc.StatusCode.NOT_FOUND

    key = stub.CreateApiKey(ac.CreateApiKeyRequest(account_id=a.account_id, scope=ac.API_KEY_SCOPE_READ_WRITE, label="ci"),
                            metadata=ops, timeout=30)
    assert key.secret.startswith(f"ubk_{key.key.key_id}.") and key.key.account_id == a.account_id
    s = stub.SignIn(ac.SignInRequest(api_key=key.secret, device_id="phone"), timeout=30)
    assert s.account_id == a.account_id and s.session_token.startswith("ubs_") and s.scope == ac.API_KEY_SCOPE_READ_WRITE
    # 128 random bits, base64url (docs/accounts.md "Token format")
    assert len(s.session_token) == 4 + 22 and re.fullmatch(r"[A-Za-z0-9_-]+", s.session_token[4:]), s.session_token
    e = failure(stub.SignIn, ac.SignInRequest(api_key=key.secret, device_id=""), timeout=30)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "device_id" in e.details()
    e = failure(stub.SignIn, ac.SignInRequest(api_key="", device_id="phone"), timeout=30)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "api_key" in e.details()


def test_list_accounts_pages_in_id_order_and_refuses_bad_pages(start_server, raw):
    srv = start_server(name="accounts-pages")
    stub = acg.AccountsStub(raw(srv))
    ops = bearer(srv.operator_key)
    made = [stub.CreateAccount(ac.CreateAccountRequest(display_name=f"a{i}"), metadata=ops, timeout=30).account_id
            for i in range(7)]

    def pages(size, deleting=None):
        seen, token, sizes = [], "", []
        while True:
            r = stub.ListAccounts(ac.ListAccountsRequest(page_size=size, page_token=token), metadata=ops, timeout=30)
            seen += [a.account_id for a in r.accounts]
            sizes.append(len(r.accounts))
            if deleting and len(sizes) == 1:
                stub.DeleteAccount(ac.DeleteAccountRequest(account_id=deleting), metadata=ops, timeout=60)
            token = r.next_page_token
            if not token:
                return seen, sizes

    everyone = sorted(made + ["default"])
    assert pages(3) == (everyone, [3, 3, 2])
    assert pages(4) == (everyone, [4, 4]), "a last full page has no next token"
    assert pages(0) == (everyone, [8]), "0 is the default page (100)"
    # an account deleted while a client pages: nobody else is skipped or listed twice
    gone = next(a for a in everyone[3:6] if a != "default")  # on the second page; "default" cannot go
    seen, _ = pages(3, deleting=gone)
    assert seen == [a for a in everyone if a != gone]

    for req, field in [(ac.ListAccountsRequest(page_size=1001), "page_size"),
                       (ac.ListAccountsRequest(page_token="not a token"), "page_token"),
                       (ac.ListAccountsRequest(page_token="p1."), "page_token"),
                       (ac.ListAccountsRequest(page_token="p1.a/b"), "page_token")]:
        e = failure(stub.ListAccounts, req, metadata=ops, timeout=30)
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and field in e.details(), e


def test_failed_sign_ins_say_nothing_about_the_key_and_are_rate_limited(start_server, raw):
    srv = start_server(name="accounts-limits")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    wrong_secret = t.api_key[:-4] + ("AAAA" if not t.api_key.endswith("AAAA") else "BBBB")
    unknown_key = "ubk_0123456789abcdef." + "x" * 43
    answers = set()
    for bad in [wrong_secret, unknown_key, "garbage"]:
        e = failure(t.accounts.SignIn, ac.SignInRequest(api_key=bad, device_id="d"), timeout=30)
        answers.add((e.code(), e.details(), reason_of(e)))
    assert answers == {(grpc.StatusCode.UNAUTHENTICATED, "the API key is not valid", "BAD_CREDENTIALS")}, answers

    # 5 failures per key ID in a window (docs/accounts.md): the 5th wrong secret for this key
    # used the last one; then even the right secret is refused until the window ends.
    for _ in range(4):
        failure(t.accounts.SignIn, ac.SignInRequest(api_key=wrong_secret, device_id="d"), timeout=30)
    e = failure(t.accounts.SignIn, ac.SignInRequest(api_key=t.api_key, device_id="d"), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "SIGN_IN_RATE_LIMITED"), e
    assert "try again in" in e.details()
    # another key of the same account still signs in (the address has failures to spare)
    other = Tenant(srv, c, "other", account_id=t.account_id)
    assert other.token.startswith("ubs_")


def test_scopes_read_only_and_one_store(start_server, raw):
    srv = start_server(name="accounts-scopes")
    c = raw(srv)
    owner = Tenant(srv, c, "owner")
    sid, ids = owner.store_with_data("notes")
    other_sid, _ = owner.store_with_data("other")

    ro = Tenant(srv, c, "ro", account_id=owner.account_id, scope=ac.API_KEY_SCOPE_READ_ONLY)
    got = ro.stores.GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=ids), metadata=ro.md, timeout=30)
    assert len(got.objects) == 2
    e = failure(ro.stores.Save, st.SaveRequest(store_id=sid, deletes=[ob.Delete(object_id=ids[0])]), metadata=ro.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.PERMISSION_DENIED, "SCOPE_EXCEEDED"), e
    e = failure(ro.stores.OpenStore, st.OpenStoreRequest(name="new-one"), metadata=ro.md, timeout=30)
    assert e.code() == grpc.StatusCode.NOT_FOUND, "a read-only session does not create stores"
    e = failure(ro.models.RegisterModel, md.RegisterModelRequest(store_id=sid, model=person_model("v2")), metadata=ro.md, timeout=30)
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED

    one = Tenant(srv, c, "one", account_id=owner.account_id, scope=ac.API_KEY_SCOPE_ONE_STORE, store_name="notes")
    assert [s.name for s in one.stores.ListStores(st.ListStoresRequest(), metadata=one.md, timeout=30).stores] == ["notes"]
    one.stores.Save(st.SaveRequest(store_id=sid, deletes=[ob.Delete(object_id=ids[0])]), metadata=one.md, timeout=30)
    for call, req in [(one.stores.GetObjects, st.GetObjectsRequest(store_id=other_sid, object_ids=ids)),
                      (one.stores.OpenStore, st.OpenStoreRequest(name="other")),
                      (one.stores.CurrentGeneration, st.CurrentGenerationRequest(store_id=other_sid))]:
        e = failure(call, req, metadata=one.md, timeout=30)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.PERMISSION_DENIED, "SCOPE_EXCEEDED"), e


def test_sign_out_and_key_revocation_end_calls_streams_and_contexts(start_server, raw):
    srv = start_server(name="accounts-revoke")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    ctx = t.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="c"), metadata=t.md, timeout=30)

    # a subscriber of the session ends when it signs out, with the position to resume from
    stream = t.changes.Subscribe(ch.SubscribeRequest(store_id=sid, **{"from": ch.StartPoint(oldest=True)}), metadata=t.md)
    first = next(stream)  # the backlog is flowing: the subscription is registered
    assert first is not None
    t.accounts.SignOut(ac.SignOutRequest(), metadata=t.md, timeout=30)
    e = failure(lambda: list(stream))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    assert resume_details(e) is not None and resume_details(e).resume_token

    e = failure(t.stores.ListStores, st.ListStoresRequest(), metadata=t.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    e = failure(t.accounts.SignOut, ac.SignOutRequest(), metadata=t.md, timeout=30)
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED

    # its context ended with it: sign-out reset it (SPEC §4.4), so the same device's new session is
    # told STORE_CHANGED (test_lifecycle_transitions.py); another device's session does not find it
    elsewhere = t.sign_in("device-9")
    e = failure(t.contexts.GetState, cx.ContextRequest(context_id=ctx.context_id), metadata=bearer(elsewhere), timeout=30)
    assert e.code() == grpc.StatusCode.NOT_FOUND
    t.accounts.SignOut(ac.SignOutRequest(), metadata=bearer(elsewhere), timeout=30)
    t.token = t.sign_in()
    e = failure(t.contexts.GetState, cx.ContextRequest(context_id=ctx.context_id), metadata=t.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_CHANGED"), e

    # revoking the key ends every session signed in with it, and its sign-ins
    second = t.sign_in("device-2")
    r = t.accounts.RevokeApiKey(ac.RevokeApiKeyRequest(key_id=t.key_id), metadata=t.ops, timeout=30)
    assert r.sessions_revoked == 2
    for token in (t.token, second):
        e = failure(t.stores.ListStores, st.ListStoresRequest(), metadata=bearer(token), timeout=30)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    e = failure(t.accounts.SignIn, ac.SignInRequest(api_key=t.api_key, device_id="d"), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS"), e


def test_an_expired_session_ends_its_stream_and_its_calls(start_server, raw):
    srv = start_server(["--session-lifetime-seconds", "3", "--feed-progress-interval-ms", "100"], name="accounts-expiry")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid = t.stores.OpenStore(st.OpenStoreRequest(name="s"), metadata=t.md, timeout=30).store.store_id
    stream = t.changes.Subscribe(ch.SubscribeRequest(store_id=sid, **{"from": ch.StartPoint(now=True)}), metadata=t.md)
    # the stream ends by itself once the session expires: wait for that event, not for a time
    e = failure(lambda: list(stream))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_EXPIRED"), e
    assert resume_details(e) is not None
    e = failure(t.stores.ListStores, st.ListStoresRequest(), metadata=t.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_EXPIRED"), e
    # signing in again gives a working session
    t.token = t.sign_in()
    assert [s.store_id for s in t.stores.ListStores(st.ListStoresRequest(), metadata=t.md, timeout=30).stores] == [sid]


def test_sessions_keys_and_store_files_survive_a_restart(start_server, raw):
    srv = start_server(name="accounts-restart")
    t = Tenant(srv, raw(srv), "t")
    sid, ids = t.store_with_data()
    key_file = (srv.data_dir / "operator.key").read_text()
    # the store's file is in its account's folder, named by the server
    path = srv.data_dir / "accounts" / t.account_id / "stores" / f"{sid}.sqlite"
    assert path.is_file(), sorted(str(p) for p in srv.data_dir.rglob("*.sqlite"))
    port = srv.port
    assert srv.stop() == 0

    # a data directory from before accounts keeps its stores in <data>/stores: they move back
    legacy = srv.data_dir / "stores"
    legacy.mkdir(exist_ok=True)
    for f in path.parent.glob(f"{sid}.sqlite*"):
        f.rename(legacy / f.name)

    again = start_server(name="accounts-restart", port=port)
    assert (again.data_dir / "operator.key").read_text() == key_file
    assert path.is_file() and not (legacy / f"{sid}.sqlite").exists()
    c = raw(again)
    got = stg.StoresStub(c).GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=ids), metadata=t.md, timeout=30)
    assert len(got.objects) == 2, "the session signed in before the restart still works"
    s = acg.AccountsStub(c).SignIn(ac.SignInRequest(api_key=t.api_key, device_id="d"), timeout=30)
    assert s.account_id == t.account_id


def test_health_reflection_and_admin_stay_open(start_server, raw):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    srv = start_server(name="accounts-open")
    c = raw(srv)
    assert health_pb2_grpc.HealthStub(c).Check(health_pb2.HealthCheckRequest(), timeout=30).status == health_pb2.HealthCheckResponse.SERVING
    from ubiquity.v1 import admin_pb2, admin_pb2_grpc
    assert admin_pb2_grpc.AdminStub(c).Ping(admin_pb2.PingRequest(payload=b"x"), timeout=30).payload == b"x"


def test_auth_off_is_refused_off_loopback(server_binary, tmp_path):
    # --allow-plaintext: past the TLS check, so the refusal is the one under test
    p = subprocess.run([str(server_binary), "--host", "0.0.0.0", "--port", "0", "--allow-plaintext", "--auth", "off",
                        "--data-dir", str(tmp_path / "d")], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert p.returncode != 0 and b"--auth off" in p.stderr, p.stderr


# -- the matrices ------------------------------------------------------------------------------------

def _methods():
    """Every (service, method descriptor) of the data services, from the generated descriptors."""
    from google.protobuf import descriptor_pool
    pool = descriptor_pool.Default()
    for name in DATA_SERVICES:
        for m in pool.FindServiceByName(name).methods:
            yield name, m


def _call(channel: grpc.Channel, service: str, m, fields: dict, metadata) -> grpc.RpcError | None:
    """Calls `m` with a request whose ID fields are `fields` (those it has); the error, or None."""
    req_cls = message_factory.GetMessageClass(m.input_type)
    res_cls = message_factory.GetMessageClass(m.output_type)
    req = req_cls()
    for f, val in fields.items():
        if f in req_cls.DESCRIPTOR.fields_by_name:
            fd = req_cls.DESCRIPTOR.fields_by_name[f]
            if hasattr(getattr(req, f), "extend"):  # repeated
                getattr(req, f).extend(val if isinstance(val, list) else [val])
            elif fd.message_type is None:
                setattr(req, f, val if not isinstance(val, list) else val[0])
    path = f"/{service}/{m.name}"
    kw = dict(request_serializer=lambda x: x.SerializeToString(), response_deserializer=res_cls.FromString)
    try:
        if m.server_streaming:
            list(channel.unary_stream(path, **kw)(req, metadata=metadata, timeout=30))
        else:
            channel.unary_unary(path, **kw)(req, metadata=metadata, timeout=30)
    except grpc.RpcError as e:
        return e
    return None


def _shape(e: grpc.RpcError | None, *ids: str) -> tuple:
    """An answer with the IDs it names replaced: what tells a foreign resource from a missing one."""
    if e is None:
        return ("OK",)
    text = e.details() or ""
    for i in ids:
        text = text.replace(i, "<id>")
    return (e.code(), reason_of(e), text)


def test_cross_account_matrix(start_server, raw):
    """B's session on every RPC with A's store, context and object IDs answers exactly as for IDs
    that do not exist, and A's store is unchanged."""
    srv = start_server(name="accounts-matrix")
    c = raw(srv)
    a, b = Tenant(srv, c, "A"), Tenant(srv, c, "B")
    sid, ids = a.store_with_data("shared-name")
    ctx = a.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="a-ctx"), metadata=a.md, timeout=30).context_id
    b_sid, _ = b.store_with_data("b-store")
    a_kv = kvg.KeyValueStub(c)
    a_kv.Set(kv.KeyValueSetRequest(key="a-key", value=b"A's"), metadata=a.md, timeout=30)

    def a_entries():
        r = a_kv.List(kv.KeyValueListRequest(), metadata=a.md, timeout=30)
        return [(e.key, e.value, e.version) for e in r.entries]
    before = a.baseline(sid), a_entries()

    missing_sid, missing_ctx = str(uuid.uuid4()), str(uuid.uuid4())
    missing_ids = [i.replace(sid, missing_sid) for i in ids]
    foreign = {"store_id": sid, "source_store_id": sid, "context_id": ctx, "parent_context_id": ctx, "object_ids": ids,
               "key": "a-key"}
    absent = {"store_id": missing_sid, "source_store_id": missing_sid, "context_id": missing_ctx,
              "parent_context_id": missing_ctx, "object_ids": missing_ids, "key": "missing-key"}
    checked = 0
    for service, m in _methods():
        if m.name in ("OpenStore", "ListStores"):
            continue  # by name / the caller's own: below
        got = _shape(_call(c, service, m, foreign, b.md), sid, ctx, "a-key", *ids)
        want = _shape(_call(c, service, m, absent, b.md), missing_sid, missing_ctx, "missing-key", *missing_ids)
        assert got == want, f"{service}/{m.name}: foreign {got} vs missing {want}"
        # key-value keys are named within the caller's own account: B's Set/List act on B's keys
        if service != "ubiquity.v1.KeyValue":
            assert got[0] != "OK", f"{service}/{m.name} succeeded on another account's resource"
        checked += 1
    assert checked >= 30, checked

    # A's object IDs in B's own store answer as object IDs of a store that does not exist
    got = _shape(failure(b.stores.GetObjects, st.GetObjectsRequest(store_id=b_sid, object_ids=ids), metadata=b.md, timeout=30), *ids)
    want = _shape(failure(b.stores.GetObjects, st.GetObjectsRequest(store_id=b_sid, object_ids=missing_ids), metadata=b.md,
                          timeout=30), *missing_ids)
    assert got == want and got[0] == grpc.StatusCode.INVALID_ARGUMENT, (got, want)
    # a store name A uses is B's own store for B, and A's never shows in B's list
    opened = b.stores.OpenStore(st.OpenStoreRequest(name="shared-name"), metadata=b.md, timeout=30)
    assert opened.created and opened.store.store_id != sid
    listed = {s.store_id for s in b.stores.ListStores(st.ListStoresRequest(), metadata=b.md, timeout=30).stores}
    assert sid not in listed and b_sid in listed
    # A is unchanged (store and key-value entries), and A's context still works
    assert (a.baseline(sid), a_entries()) == before
    a.contexts.GetState(cx.ContextRequest(context_id=ctx), metadata=a.md, timeout=30)


def test_credentials_matrix(start_server, raw):
    """Every data RPC with no, malformed, unknown, expired and revoked credentials is
    UNAUTHENTICATED with its reason, and changes nothing."""
    srv = start_server(["--session-lifetime-seconds", "6"], name="accounts-creds")
    c = raw(srv)
    a = Tenant(srv, c, "A")
    expiring = a.sign_in("soon-expired")
    sid, ids = a.store_with_data()
    a.token = a.sign_in()
    ctx = a.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="c"), metadata=a.md, timeout=30).context_id
    revoked = a.sign_in("revoked")
    a.accounts.SignOut(ac.SignOutRequest(), metadata=bearer(revoked), timeout=30)
    # wait for the event (the session's expiry), polling a cheap call
    _wait_expired(a, expiring)
    a.token = a.sign_in()
    before = a.baseline(sid)

    cases = [
        ([], "MISSING_CREDENTIALS"),
        ([("authorization", "")], "MISSING_CREDENTIALS"),
        ([("authorization", "Basic dXNlcjpwYXNz")], "BAD_CREDENTIALS"),
        ([("authorization", "Bearer")], "BAD_CREDENTIALS"),
        (bearer("ubs_short"), "BAD_CREDENTIALS"),
        (bearer(srv.operator_key), "BAD_CREDENTIALS"),
        (bearer(a.api_key), "BAD_CREDENTIALS"),
        (bearer("ubs_" + "A" * 43), "BAD_CREDENTIALS"),
        (bearer(expiring), "SESSION_EXPIRED"),
        (bearer(revoked), "SESSION_REVOKED"),
    ]
    fields = {"store_id": sid, "source_store_id": sid, "context_id": ctx, "object_ids": ids, "name": "new-store"}
    for service, m in _methods():
        for metadata, reason in cases:
            e = _call(c, service, m, fields, metadata)
            assert e is not None, f"{service}/{m.name} succeeded with {metadata}"
            assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, reason), f"{service}/{m.name} {metadata}: {e}"
    a.token = a.sign_in()
    assert a.baseline(sid) == before
    assert [s.name for s in a.stores.ListStores(st.ListStoresRequest(), metadata=a.md, timeout=30).stores] == ["notes"]


def _wait_expired(t: Tenant, token: str) -> None:
    def expired() -> bool:
        try:
            t.stores.ListStores(st.ListStoresRequest(), metadata=bearer(token), timeout=30)
            return False
        except grpc.RpcError as e:
            return reason_of(e) == "SESSION_EXPIRED"
    ubiq_harness.wait_until(expired, 30, message="the short session to expire")


def test_auth_off_serves_the_default_account_without_credentials(start_server, raw):
    srv = start_server(["--auth", "off"], name="accounts-off")
    c = raw(srv)
    stores = stg.StoresStub(c)
    sid = stores.OpenStore(st.OpenStoreRequest(name="open"), timeout=30).store.store_id
    assert [s.store_id for s in stores.ListStores(st.ListStoresRequest(), timeout=30).stores] == [sid]
    # the store is the default account's: a default-account session of the same data sees it
    t = Tenant(srv, c, "d", account_id="default")
    assert [s.store_id for s in t.stores.ListStores(st.ListStoresRequest(), metadata=t.md, timeout=30).stores] == [sid]
    assert (srv.data_dir / "accounts" / "default" / "stores" / f"{sid}.sqlite").is_file()
