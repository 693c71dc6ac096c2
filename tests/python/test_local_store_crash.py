"""kill -9 during the first-sign-in import (SPEC §4.6, issue 19): whatever the moment, after a
restart every local object is in the account's stores exactly once, none is lost, every local
key-value entry is in the account's key-value store by the documented rule (the account's value
wins for a key both have), no local file is left, the server serves — and each account store the
import wrote into holds exactly one StoresDidChange(INITIAL_IMPORT_COMPLETED) with the right
counts, replayed from a token taken before the sign-in, whether the SignIn or the restart
finished the job.

Kill points: `UBIQUITYD_TEST_CRASH_AT=import.step:N` makes ubiquityd SIGKILL itself at the N-th
step boundary of the import job (LocalImporter.testStep): job recorded, each local store copied,
copies recorded, key-value entries moved, each local store destroyed, each forgotten, removal
recorded, each DID_CHANGE appended, job done. The runs cover every boundary several times, in an
order drawn from a printed fixed seed. A kill inside a step lands inside one SQLite transaction
(the copy of one store is one save, the key-value move one transaction, an event one append),
which SQLite makes atomic; the storage crash tests cover that level.

Each run starts from a copy of one prepared data directory (small stores) so the file stays
well under a few minutes.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from contextlib import closing

import grpc

from test_accounts import Tenant, bearer, raw  # noqa: F401  (raw is a fixture)
from test_changes import Stream
from test_lifecycle_transitions import DID
from test_local_store import LocalDevice, everything, local_folders, note, person
from ubiq_client import md, person_model, st
from ubiquity.v1 import accounts_pb2 as ac, accounts_pb2_grpc as acg, admin_pb2, admin_pb2_grpc, stores_pb2_grpc as stg
from ubiquity.v1 import changes_pb2 as ch, keyvalue_pb2 as kv, keyvalue_pb2_grpc as kvg

SEED = 19_2026
# 1 recorded + 2 copies + 1 copies recorded + 1 key-values moved + 2 destroys + 2 forgets
# + 1 removal recorded + 2 DID_CHANGEs + 1 done
STEPS = 13
RUNS = 42

EXPECTED_NOTES = {"ann@x": ["ann-1", "ann-2"], "bob@x": ["bob-1"], "cy@x": ["cy-1"], "dan@x": []}
EXPECTED_EXTRA = ["eve@x", "fay@x", "gus@x"]
EXPECTED_COUNTS = (9, 1, 0)  # Ann, Bob, 4 notes, Eve, Fay, Gus inserted; Cy merged
# the account had "theme" = dark; the device "theme" = light, "seeded", "zoom" (and "tmp", deleted)
EXPECTED_KEY_VALUES = {"theme": b"dark", "seeded": b"1", "zoom": b"2"}
# ImportCounts' key_values_moved, key_values_kept: "seeded" and "zoom" moved, "theme" kept the
# account's value — reported even when the kill fell between the move and the job's next state
EXPECTED_KEY_VALUE_COUNTS = (2, 1)
ACCOUNT_CHANGE = ch.KeyValueChange.REASON_ACCOUNT_CHANGE


def prepare(srv, channel):
    """The account (store "notes" with Cy and Dan, key "theme") and the device's two local stores
    and local keys. Returns the API key, the device secret, and the account's positions before
    the sign-in: the "notes" store's token and the key-value feed token."""
    tenant = Tenant(srv, channel, "family")
    sid = tenant.stores.OpenStore(st.OpenStoreRequest(name="notes"), metadata=tenant.md, timeout=30).store.store_id
    tenant.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model()), metadata=tenant.md, timeout=60)
    tenant.stores.Save(st.SaveRequest(store_id=sid, inserts=[person("cy", "Cy", "cy@x", 50), person("dan", "Dan", "dan@x", 60)]),
                       metadata=tenant.md, timeout=30)
    keys = kvg.KeyValueStub(channel)
    kv_token = keys.Set(kv.KeyValueSetRequest(key="theme", value=b"dark", author="tablet"), metadata=tenant.md, timeout=30).feed_token
    notes_token = tenant.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=tenant.md, timeout=30).token
    phone = LocalDevice(channel, "phone")
    notes = phone.open("notes")
    phone.stores.Save(st.SaveRequest(store_id=notes, inserts=[
        person("ann", "Ann", "ann@x", 31, notes=["n1", "n2"]), note("n1", "ann-1"), note("n2", "ann-2"),
        person("bob", "Bob", "bob@x", 40, notes=["n3"]), note("n3", "bob-1"),
        person("cy", "Cy (phone)", "cy@x", 22, notes=["n4"]), note("n4", "cy-1"),
    ]), metadata=phone.md, timeout=30)
    extra = phone.open("extra")
    phone.stores.Save(st.SaveRequest(store_id=extra, inserts=[
        person("e", "Eve", "eve@x", 1), person("f", "Fay", "fay@x", 2), person("g", "Gus", "gus@x", 3)]), metadata=phone.md, timeout=30)
    for key, value in [("theme", b"light"), ("seeded", b"1"), ("zoom", b"2"), ("tmp", b"x")]:
        keys.Set(kv.KeyValueSetRequest(key=key, value=value, author="phone"), metadata=phone.md, timeout=30)
    keys.Delete(kv.KeyValueDeleteRequest(key="tmp", author="phone"), metadata=phone.md, timeout=30)
    return tenant.api_key, phone.secret, notes_token, kv_token


def move_records(srv) -> int:
    """Rows of `ubq_kv_moved` (docs/keyvalue.md "First sign-in", "The move's record")."""
    with closing(sqlite3.connect(f"file:{srv.data_dir / 'keyvalue.sqlite'}?mode=ro", uri=True)) as db:
        return db.execute("SELECT count(*) FROM ubq_kv_moved").fetchone()[0]


def replay_until_caught_up(channel, session, request: ch.SubscribeRequest) -> list[ch.SubscribeResponse]:
    s = Stream(channel, request, metadata=session)
    try:
        return s.caught_up()
    finally:
        s.cancel()


def check_announced(channel, session, ids: dict[str, str], notes_token: bytes, kv_token: bytes) -> None:
    """Exactly one DID_CHANGE(INITIAL_IMPORT_COMPLETED) with the counts on each store the import
    wrote into, after its transaction; the moved keys on the key-value feed as ACCOUNT_CHANGE."""
    for name, start in [("notes", ch.StartPoint(token=notes_token)), ("extra", ch.StartPoint(oldest=True))]:
        got = replay_until_caught_up(channel, session, ch.SubscribeRequest(store_id=ids[name], **{"from": start}))
        kinds = [r.WhichOneof("event") for r in got]
        dids = [r.store_event for r in got if r.HasField("store_event")]
        assert [(e.phase, e.transition) for e in dids] == [(DID, ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED)], (name, kinds)
        assert kinds.index("store_event") > kinds.index("transactions"), f"{name}: the DID_CHANGE comes after the import: {kinds}"
        c = dids[0].import_counts
        assert (c.inserted, c.merged, c.deduplicated) == EXPECTED_COUNTS and not dids[0].using_local_storage
        assert (c.key_values_moved, c.key_values_kept) == EXPECTED_KEY_VALUE_COUNTS, name
    got = replay_until_caught_up(channel, session, ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": ch.StartPoint(token=kv_token)}))
    changes = [r.key_value_change for r in got if r.HasField("key_value_change")]
    assert sorted((c.key, c.value, c.reason, c.author) for c in changes) == [
        ("seeded", b"1", ACCOUNT_CHANGE, "phone"), ("zoom", b"2", ACCOUNT_CHANGE, "phone")]


def check_imported(srv, channel, api_key: str, secret: str, notes_token: bytes, kv_token: bytes) -> None:
    """Every local object exactly once in the account, relationships kept, every local key
    moved by the rule, nothing local left, the import announced once."""
    accounts = acg.AccountsStub(channel)
    signed = accounts.SignIn(ac.SignInRequest(api_key=api_key, device_id="phone", local_device_secret=secret), timeout=60)
    c = signed.local_import
    assert (c.inserted, c.merged, c.deduplicated) == EXPECTED_COUNTS
    assert (c.key_values_moved, c.key_values_kept) == EXPECTED_KEY_VALUE_COUNTS
    session = bearer(signed.session_token)
    stores = stg.StoresStub(channel)
    ids = {s.name: s.store_id for s in stores.ListStores(st.ListStoresRequest(), metadata=session, timeout=30).stores}
    assert sorted(ids) == ["extra", "notes"]
    got = everything(stores, ids["notes"], session)
    emails = [o.values["email"].string_value for o in got["Person"]]
    assert sorted(emails) == sorted(EXPECTED_NOTES)  # each exactly once
    titles = {o.object_id: o.values["title"].string_value for o in got["Note"]}
    assert sorted(titles.values()) == ["ann-1", "ann-2", "bob-1", "cy-1"]
    owned = {o.values["email"].string_value: sorted(titles[i] for i in o.relationships["notes"].object_ids) for o in got["Person"]}
    assert owned == EXPECTED_NOTES
    extra = everything(stores, ids["extra"], session)
    assert sorted(o.values["email"].string_value for o in extra["Person"]) == EXPECTED_EXTRA
    assert local_folders(srv) == []
    keys = kvg.KeyValueStub(channel)
    listed = keys.List(kv.KeyValueListRequest(), metadata=session, timeout=30)
    assert {e.key: e.value for e in listed.entries} == EXPECTED_KEY_VALUES
    check_announced(channel, session, ids, notes_token, kv_token)
    # the device's registration is gone with its stores: it starts afresh if it works locally again
    fresh = accounts.StartLocalSession(ac.StartLocalSessionRequest(device_id="phone"), timeout=30)
    assert fresh.device_secret and fresh.device_secret != secret
    assert admin_pb2_grpc.AdminStub(channel).Ping(admin_pb2.PingRequest(payload=b"serving"), timeout=10).payload == b"serving"


def test_kill_9_during_the_first_sign_in_import(start_server, raw, tmp_path, monkeypatch):
    template = start_server(args=["--local-stores"], name="template")
    api_key, secret, notes_token, kv_token = prepare(template, raw(template))
    assert template.stop() == 0

    # every boundary, plus STEPS + 1: a run without a kill (the expected outcome, and proof that
    # STEPS boundaries are all there are)
    order = list(range(1, STEPS + 2)) * (RUNS // (STEPS + 1))
    rng = random.Random(SEED)
    rng.shuffle(order)
    print(f"seed {SEED}: kill steps {order}")
    assert len(order) >= 30 and set(order) == set(range(1, STEPS + 2))
    for run, step in enumerate(order):
        name = f"run{run}"
        shutil.copytree(template.data_dir, tmp_path / f"{name}-data")
        monkeypatch.setenv("UBIQUITYD_TEST_CRASH_AT", f"import.step:{step}")
        srv = start_server(args=["--local-stores"], name=name)
        monkeypatch.delenv("UBIQUITYD_TEST_CRASH_AT")
        stub = acg.AccountsStub(raw(srv))
        try:
            stub.SignIn(ac.SignInRequest(api_key=api_key, device_id="phone", local_device_secret=secret), timeout=60)
            assert step == STEPS + 1, f"run {run}: step {step} did not kill the server"
            assert srv.stop() == 0
        except grpc.RpcError as e:
            assert step <= STEPS and e.code() == grpc.StatusCode.UNAVAILABLE, f"run {run} step {step}: {e}"
            assert srv.wait(30) == -9
        # restart: the pending job finishes before the server serves
        again = start_server(args=["--local-stores"], name=name)
        # its key-value move's record too is gone before serving (job ended, nothing in flight):
        # the SignIn below still reports the counts, from the job
        assert move_records(again) == 0, f"run {run} step {step}"
        check_imported(again, raw(again), api_key, secret, notes_token, kv_token)
        assert again.stop() == 0
        shutil.rmtree(tmp_path / f"{name}-data")
