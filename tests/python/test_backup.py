"""Online backups and restores (issue 21, docs/operations.md "Back up and restore"): Admin.Backup
taken while clients save, restored offline into an empty data directory (`ubiquityd
--restore-from`) and online one store at a time (Admin.RestoreStore); the refusals; and a
backup interrupted by kill -9."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import threading
import uuid
from pathlib import Path

import grpc
import pytest

from conftest import make_channel
from ubiq_client import Client, error_of, ob, person_model, st, unpack, v
from ubiq_harness import wait_until
from ubiquity.v1 import accounts_pb2 as ac, accounts_pb2_grpc as acg, admin_pb2 as ad, admin_pb2_grpc as adg, keyvalue_pb2 as kv

TIMEOUT = 60


def operator(srv) -> list[tuple[str, str]]:
    """Admin.Backup and RestoreStore are operator calls (docs/accounts.md)."""
    return [("authorization", f"Bearer {srv.operator_key}")]


@pytest.fixture
def connect(start_server):
    """connect(srv) -> Client on a channel of its own, closed when the test ends (before the
    servers' leak check)."""
    channels: list[grpc.Channel] = []

    def make(srv) -> Client:
        ch = make_channel(srv.address)
        channels.append(ch)
        return Client(ch)

    yield make
    for ch in channels:
        ch.close()


def backup(srv, directory: Path, store_id: str = "") -> ad.BackupManifest:
    with make_channel(srv.address) as ch:
        return adg.AdminStub(ch).Backup(ad.BackupRequest(directory=str(directory), store_id=store_id),
                                        metadata=operator(srv), timeout=TIMEOUT)


def restore_store(srv, directory: Path, store_id: str = "", replace: bool = False) -> ad.RestoreStoreResponse:
    with make_channel(srv.address) as ch:
        return adg.AdminStub(ch).RestoreStore(
            ad.RestoreStoreRequest(directory=str(directory), store_id=store_id, replace_existing=replace),
            metadata=operator(srv), timeout=TIMEOUT)


def restore_offline(server_binary, backup_dir: Path, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(server_binary), "--data-dir", str(data_dir), "--restore-from", str(backup_dir), "--log-level", "error"],
                          capture_output=True, text=True, timeout=120)


def names(c: Client, sid: str) -> set[str]:
    return {unpack(o.values["name"]) for o in c.fetch(sid, "Person").objects}


def insert(c: Client, sid: str, name: str, payload: str = "") -> ob.SaveResult:
    values = {"name": v(name)}
    if payload:
        values["email"] = v(payload)
    return c.save(sid, inserts=[ob.Insert(temporary_id="p", entity="Person", values=values)])


def expect_error(call, code, reason):
    with pytest.raises(grpc.RpcError) as e:
        call()
    got = error_of(e.value)
    assert got[0] == code and got[2] == reason, got
    return got[1]


def test_backup_under_write_load_restores_every_acknowledged_save(start_server, connect, server_binary, tmp_path):
    srv = start_server(name="source")
    c = connect(srv)
    stores = {f"notes-{i}": c.open(f"notes-{i}", model=person_model()) for i in range(3)}
    c.kv.Set(kv.KeyValueSetRequest(key="settings.theme", value=b"dark"), metadata=c.md, timeout=TIMEOUT)

    # Each writer has its own connection; a save is recorded only once it is acknowledged.
    acked: list[tuple[str, str, int]] = []  # (store id, name, generation)
    lock = threading.Lock()
    stop = threading.Event()
    enough = threading.Event()
    errors: list[BaseException] = []

    def writer(w: int):
        wc = connect(srv)
        try:
            n = 0
            while not stop.is_set():
                sid = list(stores.values())[n % len(stores)]
                name = f"w{w}-{n}"
                r = insert(wc, sid, name)
                with lock:
                    acked.append((sid, name, r.generation))
                    if len(acked) >= 60:
                        enough.set()
                n += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)
            enough.set()
        finally:
            wc.channel.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    try:
        assert enough.wait(TIMEOUT) and not errors, errors
        with lock:
            before = list(acked)
        directory = tmp_path / "backup-under-load"
        manifest = backup(srv, directory)
        with lock:
            during = len(acked) - len(before)
        # and the writes keep going after the backup returned
        wait_until(lambda: len(acked) >= len(before) + during + 10, timeout=TIMEOUT, message="saves after the backup")
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    assert not errors, errors

    # The manifest is on disk and says what the response says.
    on_disk = json.loads((directory / "manifest.json").read_text())
    assert on_disk["format_version"] == 1 and manifest.format_version == 1
    assert {"catalog.sqlite", "keyvalue.sqlite"} <= {d.file for d in manifest.databases}
    assert {d["file"]: d["sha256"] for d in on_disk["databases"]} == {d.file: d.sha256 for d in manifest.databases}
    by_id = {s.store_id: s for s in manifest.stores}
    assert set(stores.values()) <= set(by_id)
    assert {s["store_id"]: s["generation"] for s in on_disk["stores"]} == {s.store_id: s.generation for s in manifest.stores}
    for sid in stores.values():
        entry = by_id[sid]
        assert entry.account == "default" and entry.name in stores and len(entry.sha256) == 64
        # every save acknowledged before the backup began is at or below the copy's generation
        assert max(g for s, _, g in before if s == sid) <= entry.generation
        # each copy is a whole SQLite database at exactly that generation
        with sqlite3.connect(f"file:{directory / entry.file}?mode=ro", uri=True) as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert db.execute("SELECT value FROM ubq_meta WHERE key = 'generation'").fetchone()[0] == entry.generation
        assert (directory / entry.file).stat().st_size == entry.size_bytes

    # accounts and API keys are in the backup, sessions are not (Credentials.backup)
    with sqlite3.connect(f"file:{directory / 'credentials.sqlite'}?mode=ro", uri=True) as db:
        assert db.execute("SELECT count(*) FROM ubq_api_keys").fetchone()[0] >= 1
        assert db.execute("SELECT count(*) FROM ubq_sessions").fetchone()[0] == 0
    api_key = srv.api_key
    assert api_key

    srv.stop()
    restored_dir = tmp_path / "restored-data"
    r = restore_offline(server_binary, directory, restored_dir)
    assert r.returncode == 0, r.stderr
    assert "restored" in r.stdout

    restored = start_server(name="restored")
    assert restored.data_dir == restored_dir
    rc = connect(restored)
    listed = {s.name: s.store_id for s in rc.stores.ListStores(st.ListStoresRequest(), timeout=TIMEOUT).stores}
    assert {n: listed[n] for n in stores} == stores  # same names, same IDs
    for sid in stores.values():
        g = by_id[sid].generation
        assert rc.current(sid).generation == g
        # exactly the saves at or below the copy's generation: every one acknowledged before the
        # backup, none half-applied (one object per save)
        assert names(rc, sid) == {n for s, n, gen in acked if s == sid and gen <= g}
        assert {n for s, n, _ in before if s == sid} <= names(rc, sid)
        # and the restored store takes saves again, after its restored generation
        assert insert(rc, sid, "after-restore").generation == g + 1
    assert rc.kv.Get(kv.KeyValueGetRequest(key="settings.theme"), metadata=rc.md, timeout=TIMEOUT).value == b"dark"
    # the source's API key signs in to the restored server (its sessions did not come along)
    with grpc.insecure_channel(restored.address) as ch:
        assert acg.AccountsStub(ch).SignIn(ac.SignInRequest(api_key=api_key, device_id="after-restore"), timeout=TIMEOUT).session_token


def test_restore_one_store_online_and_the_refusals(start_server, connect, server_binary, tmp_path):
    srv = start_server()
    c = connect(srv)
    sid = c.open(f"diary-{uuid.uuid4()}", model=person_model())
    insert(c, sid, "kept")
    other = c.open(f"other-{uuid.uuid4()}", model=person_model())
    insert(c, other, "untouched")

    one = tmp_path / "one"
    m = backup(srv, one, store_id=sid)
    assert [s.store_id for s in m.stores] == [sid] and not m.databases
    old_token = insert(c, sid, "after-backup").token

    # a store that exists is replaced only when asked
    msg = expect_error(lambda: restore_store(srv, one), grpc.StatusCode.FAILED_PRECONDITION, "STORE_EXISTS")
    assert "replace_existing" in msg
    assert names(c, sid) == {"kept", "after-backup"}
    r = restore_store(srv, one, replace=True)
    assert r.store_id == sid and r.generation == m.stores[0].generation
    assert names(c, sid) == {"kept"}
    assert names(c, other) == {"untouched"}
    # tokens of the store before the restore are from another epoch
    expect_error(lambda: c.get(sid, [], token=old_token), grpc.StatusCode.FAILED_PRECONDITION, "STORE_REPLACED")

    # a destroyed store comes back under its ID and name
    name = next(s.name for s in c.stores.ListStores(st.ListStoresRequest(), timeout=TIMEOUT).stores if s.store_id == sid)
    c.stores.DestroyStore(st.DestroyStoreRequest(store_id=sid), timeout=TIMEOUT)
    assert restore_store(srv, one, store_id=sid).store_id == sid
    assert names(c, sid) == {"kept"}
    assert c.stores.OpenStore(st.OpenStoreRequest(name=name, must_exist=True), timeout=TIMEOUT).store.store_id == sid

    # operator calls only: no credentials, or a session's, are refused and change nothing
    with make_channel(srv.address) as ch:
        stub = adg.AdminStub(ch)
        for md in ([], [("authorization", f"Bearer {srv.token}")]):
            with pytest.raises(grpc.RpcError) as e:
                stub.Backup(ad.BackupRequest(directory=str(tmp_path / "denied")), metadata=md, timeout=TIMEOUT)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED and "operator" in e.value.details()
            with pytest.raises(grpc.RpcError) as e:
                stub.RestoreStore(ad.RestoreStoreRequest(directory=str(one), replace_existing=True), metadata=md, timeout=TIMEOUT)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert not (tmp_path / "denied").exists()
    assert names(c, sid) == {"kept"}

    # a backup never goes into a directory that holds anything
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    expect_error(lambda: backup(srv, tmp_path / "busy"), grpc.StatusCode.FAILED_PRECONDITION, "BACKUP_DIRECTORY_NOT_EMPTY")
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["notes.txt"]
    expect_error(lambda: backup(srv, Path("relative/dir")), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    expect_error(lambda: backup(srv, tmp_path / "x", store_id="nope"), grpc.StatusCode.INVALID_ARGUMENT, "BAD_STORE_ID")
    expect_error(lambda: backup(srv, tmp_path / "y", store_id=str(uuid.uuid4())), grpc.StatusCode.NOT_FOUND, "STORE_NOT_FOUND")

    # a changed file fails its checksum; nothing is restored
    damaged = tmp_path / "damaged"
    shutil.copytree(one, damaged)
    store_file = damaged / m.stores[0].file
    data = bytearray(store_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    store_file.write_bytes(bytes(data))
    insert(c, sid, "still-here")
    expect_error(lambda: restore_store(srv, damaged, replace=True), grpc.StatusCode.DATA_LOSS, "BACKUP_CHECKSUM_MISMATCH")
    assert names(c, sid) == {"kept", "still-here"}

    # no manifest: an unfinished backup
    unfinished = tmp_path / "unfinished"
    shutil.copytree(one, unfinished)
    (unfinished / "manifest.json").unlink()
    msg = expect_error(lambda: restore_store(srv, unfinished, replace=True), grpc.StatusCode.FAILED_PRECONDITION, "BACKUP_INCOMPLETE")
    assert "manifest.json" in msg

    # the offline restore takes only a full backup, and only into an empty data directory
    r = restore_offline(server_binary, one, tmp_path / "fresh")
    assert r.returncode == 2 and "backup of one store" in r.stderr
    full = tmp_path / "full"
    backup(srv, full)
    r = restore_offline(server_binary, full, srv.data_dir)
    assert r.returncode != 0 and ("not empty" in r.stderr or "in use" in r.stderr)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("x")
    r = restore_offline(server_binary, full, occupied)
    assert r.returncode == 2 and "not empty" in r.stderr
    assert [p.name for p in occupied.iterdir()] == ["keep.txt"]


def test_kill_during_backup_leaves_an_unrestorable_partial_backup(start_server, connect, server_binary, tmp_path):
    srv = start_server(name="victim")
    c = connect(srv)
    sid = c.open("big", model=person_model())
    # about 8 MiB: the copy and its checksum take long enough to be caught midway
    for batch in range(4):
        c.save(sid, inserts=[ob.Insert(temporary_id=f"p{i}", entity="Person",
                                       values={"name": v(f"b{batch}-{i}"), "email": v(f"b{batch}-{i}-" + "x" * 1024)}) for i in range(2000)])
    generation = c.current(sid).generation

    directory = tmp_path / "partial"
    failed: list[grpc.RpcError] = []

    def run_backup():
        try:
            backup(srv, directory)
        except grpc.RpcError as e:
            failed.append(e)

    t = threading.Thread(target=run_backup)
    t.start()
    wait_until(lambda: any((directory / "stores").glob("*.sqlite")), timeout=TIMEOUT, interval=0.001,
               message="the backup's first store file")
    srv.kill()
    t.join(TIMEOUT)
    assert failed, "the backup call must not succeed: its server was killed"
    assert not (directory / "manifest.json").exists()

    # the data directory is unharmed and the server starts on it again
    again = start_server(name="victim")
    c2 = connect(again)
    assert c2.current(sid).generation == generation
    assert len(c2.fetch(sid, "Person", predicate="name BEGINSWITH 'b3-'").objects) == 2000
    # the partial directory is recognisable as such and is never restored
    expect_error(lambda: restore_store(again, directory, store_id=sid, replace=True),
                 grpc.StatusCode.FAILED_PRECONDITION, "BACKUP_INCOMPLETE")
    r = restore_offline(server_binary, directory, tmp_path / "from-partial")
    assert r.returncode == 2 and "manifest.json" in r.stderr
    # nor is it reused for a new backup; a new directory works
    expect_error(lambda: backup(again, directory), grpc.StatusCode.FAILED_PRECONDITION, "BACKUP_DIRECTORY_NOT_EMPTY")
    assert [s.store_id for s in backup(again, tmp_path / "complete").stores] == [sid]
