"""Local fallback stores and the first-sign-in import against a real ubiquityd (SPEC §4.6,
docs/accounts.md "Local stores").

A device not signed in works in its own local stores (Accounts.StartLocalSession: a session bound
to a device secret); signing in with that secret imports them into the account's stores of the
same names — deduplicated through uniqueness constraints, relationships kept — and removes them.
Raw channels on purpose: every call carries exactly the credentials under test.
"""

from __future__ import annotations

import grpc
import pytest

from test_accounts import Tenant, bearer, failure, raw, reason_of  # noqa: F401  (raw is a fixture)
from test_changes import Stream
from test_lifecycle_transitions import DID, WILL, _ending, _event
from ubiq_client import cx, md, ob, person_model, st, v
from ubiquity.v1 import (
    accounts_pb2 as ac,
    accounts_pb2_grpc as acg,
    changes_pb2 as ch,
    changes_pb2_grpc as chg,
    models_pb2_grpc as mdg,
    stores_pb2_grpc as stg,
)


class LocalDevice:
    """A device working locally: its secret, its session and stubs carrying that session."""

    def __init__(self, channel: grpc.Channel, device_id: str):
        self.device_id = device_id
        self.accounts = acg.AccountsStub(channel)
        first = self.accounts.StartLocalSession(ac.StartLocalSessionRequest(device_id=device_id), timeout=30)
        assert first.device_secret.startswith("ubd_") and first.session_token.startswith("ubs_")
        self.secret, self.token = first.device_secret, first.session_token
        self.stores = stg.StoresStub(channel)
        self.models = mdg.ModelsStub(channel)
        self.changes = chg.ChangesStub(channel)

    @property
    def md(self):
        return bearer(self.token)

    def open(self, name: str) -> str:
        sid = self.stores.OpenStore(st.OpenStoreRequest(name=name), metadata=self.md, timeout=30).store.store_id
        self.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model()), metadata=self.md, timeout=60)
        return sid


def person(tid: str, name: str, email: str, age: int, notes=()) -> ob.Insert:
    rel = {"notes": ob.ObjectRefList(refs=[ob.ObjectRef(temporary_id=n) for n in notes])} if notes else {}
    return ob.Insert(temporary_id=tid, entity="Person",
                     values={"name": v(name), "email": v(email), "age": v(age, kind="int32")}, relationships=rel)


def note(tid: str, title: str) -> ob.Insert:
    return ob.Insert(temporary_id=tid, entity="Note", values={"title": v(title)})


def everything(stores, sid: str, metadata) -> dict[str, list[ob.ManagedObject]]:
    return {e: list(stores.Fetch(st.FetchRequest(store_id=sid, fetch=ob.FetchSpec(entity=e)), metadata=metadata, timeout=30).objects)
            for e in ("Person", "Note")}


def local_folders(srv) -> list[str]:
    accounts = srv.data_dir / "accounts"
    return sorted(p.name for p in accounts.iterdir() if p.name.startswith("local-")) if accounts.exists() else []


def test_local_work_is_imported_on_first_sign_in(start_server, raw):
    srv = start_server(args=["--local-stores"], name="local-import")
    channel = raw(srv)
    phone = LocalDevice(channel, "phone-1")

    # the device's subscriber learns it works in local storage, first thing
    local_sid = phone.open("notes")
    feed = phone.changes.Subscribe(ch.SubscribeRequest(store_id=local_sid), metadata=phone.md, timeout=30)
    first = next(feed)
    assert first.WhichOneof("event") == "store_event"
    assert first.store_event.using_local_storage and first.store_event.transition == ch.StoreEvent.TRANSITION_UNSPECIFIED

    # local work: people with notes (relationships), one of them (cy@) also in the account already
    phone.stores.Save(st.SaveRequest(store_id=local_sid, inserts=[
        person("ann", "Ann", "ann@x", 31, notes=["n1", "n2"]), note("n1", "ann-1"), note("n2", "ann-2"),
        person("bob", "Bob", "bob@x", 40, notes=["n3"]), note("n3", "bob-1"),
        person("cy", "Cy (phone)", "cy@x", 22, notes=["n4"]), note("n4", "cy-1"),
    ]), metadata=phone.md, timeout=30)

    # the account, with its own store of the same name holding Cy and Dan
    tenant = Tenant(srv, channel, "family")
    account_sid = tenant.stores.OpenStore(st.OpenStoreRequest(name="notes"), metadata=tenant.md, timeout=30).store.store_id
    tenant.models.RegisterModel(md.RegisterModelRequest(store_id=account_sid, model=person_model()), metadata=tenant.md, timeout=60)
    tenant.stores.Save(st.SaveRequest(store_id=account_sid, inserts=[
        person("cy", "Cy", "cy@x", 50), person("dan", "Dan", "dan@x", 60)]), metadata=tenant.md, timeout=30)

    # another device cannot reach phone-1's local store, nor take its identity
    tablet = LocalDevice(channel, "tablet-1")
    e = failure(tablet.stores.Fetch, st.FetchRequest(store_id=local_sid, fetch=ob.FetchSpec(entity="Person")), metadata=tablet.md, timeout=30)
    assert e.code() == grpc.StatusCode.NOT_FOUND and reason_of(e) == "STORE_NOT_FOUND"
    assert [s.name for s in tablet.stores.ListStores(st.ListStoresRequest(), metadata=tablet.md, timeout=30).stores] == []
    for secret in ("", tablet.secret, phone.secret + "x"):
        e = failure(phone.accounts.StartLocalSession, ac.StartLocalSessionRequest(device_id="phone-1", device_secret=secret), timeout=30)
        assert e.code() == grpc.StatusCode.UNAUTHENTICATED and reason_of(e) == "BAD_CREDENTIALS", secret
    # nor import it into its own account with a wrong secret (nothing changes)
    e = failure(tenant.accounts.SignIn, ac.SignInRequest(api_key=tenant.api_key, device_id="phone-1", local_device_secret=tablet.secret), timeout=30)
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED
    assert len(everything(phone.stores, local_sid, phone.md)["Person"]) == 3
    tablet.open("scratch")
    before = local_folders(srv)
    assert len(before) == 2 and not any("phone" in f or "tablet" in f for f in before)  # IDs, never device IDs
    # the right secret opens another local session of the same device
    again = phone.accounts.StartLocalSession(ac.StartLocalSessionRequest(device_id="phone-1", device_secret=phone.secret), timeout=30)
    assert again.device_secret == "" and again.session_token != phone.token

    # first sign-in: the import, with its counts
    signed = tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id="phone-1", local_device_secret=phone.secret), timeout=60)
    assert signed.HasField("local_import")
    counts = signed.local_import
    assert (counts.inserted, counts.merged, counts.deduplicated) == (6, 1, 0)  # Ann, Bob, 4 notes; Cy merged

    # the account's store holds the union exactly, relationships kept (also through the merge)
    got = everything(tenant.stores, account_sid, bearer(signed.session_token))
    people = {o.values["email"].string_value: o for o in got["Person"]}
    assert sorted(people) == ["ann@x", "bob@x", "cy@x", "dan@x"]
    assert len(got["Note"]) == 4
    titles = {o.object_id: o.values["title"].string_value for o in got["Note"]}
    owned = {e: sorted(titles[i] for i in people[e].relationships["notes"].object_ids) for e in people}
    assert owned == {"ann@x": ["ann-1", "ann-2"], "bob@x": ["bob-1"], "cy@x": ["cy-1"], "dan@x": []}
    assert people["cy@x"].values["name"].string_value == "Cy (phone)"  # the device's values win the merge

    # the local store is gone: its sessions ended, its files removed, its ID unknown
    with pytest.raises(grpc.RpcError) as ended:
        list(feed)
    assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
    e = failure(phone.stores.ListStores, st.ListStoresRequest(), metadata=phone.md, timeout=30)
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED and reason_of(e) == "SESSION_REVOKED"
    left = local_folders(srv)
    assert len(left) == 1 and left[0] in before  # tablet-1's only

    # a retried SignIn reports the same import and imports nothing again
    retried = tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id="phone-1", local_device_secret=phone.secret), timeout=60)
    assert retried.local_import == counts
    after = everything(tenant.stores, account_sid, bearer(retried.session_token))
    assert (len(after["Person"]), len(after["Note"])) == (4, 4)

    # a SignIn without the secret imports nothing and keeps the local stores
    plain = tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id="tablet-1"), timeout=30)
    assert not plain.HasField("local_import") and len(local_folders(srv)) == 1


def test_import_refused_without_write_scope_or_with_another_model_changes_nothing(start_server, raw):
    srv = start_server(args=["--local-stores"], name="local-refused")
    channel = raw(srv)
    phone = LocalDevice(channel, "phone-2")
    local_sid = phone.open("notes")
    phone.stores.Save(st.SaveRequest(store_id=local_sid, inserts=[person("a", "Ann", "ann@x", 1)]), metadata=phone.md, timeout=30)

    reader = Tenant(srv, channel, "readers", scope=ac.API_KEY_SCOPE_READ_ONLY)
    e = failure(reader.accounts.SignIn, ac.SignInRequest(api_key=reader.api_key, device_id="phone-2", local_device_secret=phone.secret), timeout=30)
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED and reason_of(e) == "SCOPE_EXCEEDED"

    other = Tenant(srv, channel, "other-model")
    sid = other.stores.OpenStore(st.OpenStoreRequest(name="notes"), metadata=other.md, timeout=30).store.store_id
    other.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model("v2", extra_person_attrs=[
        md.Attribute(name="nickname", type=md.ATTRIBUTE_TYPE_STRING)])), metadata=other.md, timeout=60)
    e = failure(other.accounts.SignIn, ac.SignInRequest(api_key=other.api_key, device_id="phone-2", local_device_secret=phone.secret), timeout=30)
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and reason_of(e) == "LOCAL_IMPORT_CONFLICT"

    # nothing changed: the local session still works on its data; the accounts' stores are as they were
    assert len(everything(phone.stores, local_sid, phone.md)["Person"]) == 1
    assert everything(other.stores, sid, other.md)["Person"] == []
    assert [s.name for s in reader.stores.ListStores(st.ListStoresRequest(), metadata=reader.md, timeout=30).stores] == []


def test_local_sessions_refused_when_the_server_does_not_allow_them(start_server, raw):
    srv = start_server(name="local-off")
    stub = acg.AccountsStub(raw(srv))
    e = failure(stub.StartLocalSession, ac.StartLocalSessionRequest(device_id="phone-3"), timeout=30)
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and reason_of(e) == "LOCAL_STORES_DISABLED"
    assert "--local-stores" in e.details()
    assert local_folders(srv) == []
    srv2 = start_server(args=["--local-stores"], name="local-bad-id")
    e = failure(acg.AccountsStub(raw(srv2)).StartLocalSession, ac.StartLocalSessionRequest(device_id=""), timeout=30)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_first_sign_in_announces_the_import_to_the_device_then_completes_it_on_the_accounts_store(start_server, raw):
    srv = start_server(args=["--local-stores"], name="local-import-events")
    channel = raw(srv)
    phone = LocalDevice(channel, "phone-1")
    local_sid = phone.open("notes")
    phone.stores.Save(st.SaveRequest(store_id=local_sid, inserts=[person("ann", "Ann", "ann@x", 31)]), metadata=phone.md, timeout=30)
    local_feed = Stream(channel, ch.SubscribeRequest(store_id=local_sid, **{"from": ch.StartPoint(now=True)}), metadata=phone.md)
    assert local_feed.next().HasField("store_event")  # "you are in local storage", then caught up
    assert local_feed.next().HasField("caught_up")
    tenant = Tenant(srv, channel, "family")
    account_sid = tenant.stores.OpenStore(st.OpenStoreRequest(name="notes"), metadata=tenant.md, timeout=30).store.store_id
    tenant.models.RegisterModel(md.RegisterModelRequest(store_id=account_sid, model=person_model()), metadata=tenant.md, timeout=60)
    tenant.stores.Save(st.SaveRequest(store_id=account_sid, inserts=[person("dan", "Dan", "dan@x", 60)]), metadata=tenant.md, timeout=30)
    start = tenant.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=account_sid), metadata=tenant.md, timeout=30).token
    account_feed = Stream(channel, ch.SubscribeRequest(store_id=account_sid, **{"from": ch.StartPoint(token=start)}), metadata=tenant.md)
    assert account_feed.next().HasField("caught_up")

    # a context of the device with unsaved work: its chance to save comes before the import
    pending = tenant.contexts.CreateContext(cx.CreateContextRequest(store_id=local_sid, name="draft"), metadata=phone.md, timeout=30).context_id
    tenant.contexts.Insert(cx.ContextInsertRequest(context_id=pending, inserts=[person("eve", "Eve", "eve@x", 28)]), metadata=phone.md, timeout=30)
    signing_in = tenant.accounts.SignIn.future(
        ac.SignInRequest(api_key=tenant.api_key, device_id="phone-1", local_device_secret=phone.secret), timeout=60)

    # the device's local subscriber hears it first, while still in local storage
    will = local_feed.next()
    assert _event(will) == (WILL, ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED) and will.store_event.using_local_storage
    tenant.contexts.Save(cx.ContextSaveRequest(context_id=pending), metadata=phone.md, timeout=30)  # saved in the window
    counts = signing_in.result().local_import
    assert (counts.inserted, counts.merged, counts.deduplicated) == (2, 0, 0)  # Ann, and Eve saved in the window
    e = _ending(local_feed)
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e

    # the account's store: the imported transaction, then DID_CHANGE with the counts
    imported = account_feed.next()
    assert imported.HasField("transactions"), imported
    did = account_feed.next()
    assert _event(did) == (DID, ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED)
    assert not did.store_event.using_local_storage
    c = did.store_event.import_counts
    assert (c.inserted, c.merged, c.deduplicated) == (2, 0, 0)
    account_feed.cancel()
    # durable: a subscription of the device made later replays it from the same token
    replay = Stream(channel, ch.SubscribeRequest(store_id=account_sid, **{"from": ch.StartPoint(token=start)}),
                    metadata=bearer(signing_in.result().session_token))
    got = [replay.next(), replay.next()]
    assert got[0].HasField("transactions") and _event(got[1]) == (DID, ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED)
    assert got[1].resume_token == did.resume_token
    replay.cancel()


def test_every_local_subscriber_hears_the_import_before_its_stream_ends(start_server, raw):
    # The import revokes the device's local sessions right after the local stores' WILL_CHANGE.
    # Their streams used to end at once, so a subscriber that had not been sent the event yet
    # (about one in ten, with no context to hold the transition open) never heard of the import.
    # Now each stream ends only after what its store had published. Ten devices, so the old
    # race would very likely show.
    srv = start_server(args=["--local-stores"], name="local-import-will-before-end")
    channel = raw(srv)
    tenant = Tenant(srv, channel, "family")
    for i in range(10):
        phone = LocalDevice(channel, f"phone-{i}")
        local_sid = phone.open("notes")
        phone.stores.Save(st.SaveRequest(store_id=local_sid, inserts=[person("ann", "Ann", f"ann{i}@x", 31)]),
                          metadata=phone.md, timeout=30)
        feed = Stream(channel, ch.SubscribeRequest(store_id=local_sid, **{"from": ch.StartPoint(now=True)}), metadata=phone.md)
        feed.caught_up()
        tenant.accounts.SignIn(ac.SignInRequest(api_key=tenant.api_key, device_id=f"phone-{i}", local_device_secret=phone.secret),
                               timeout=60)
        e = _ending(feed)
        assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
        got = []
        while not feed.events.empty():
            got.append(feed.events.get_nowait())
        events = [_event(r) for r in got if r.HasField("store_event")]
        assert (WILL, ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED) in events, f"device {i}: {got}"
