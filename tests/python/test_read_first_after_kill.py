"""kill -9 during saves, then a read as the first call on the restarted server (docs/storage.md
rule 10): a store whose file is complete reopens without its writer connection, so the first
connection on the file after the kill is a read-only one, and the WAL's recovery happens there.
Every acknowledged save must be visible to that first read; a save afterwards must still work."""

from __future__ import annotations

import os
import threading

import grpc

import ubiq_harness
from conftest import make_channel
from ubiq_client import Client, ob, person_model, unpack, v


def database_access_modes(pid: int, store_id: str) -> list[int]:
    """O_ACCMODE of every descriptor the server holds on the store's database file (not its
    -wal or -shm): read connections open it O_RDONLY, the writer O_RDWR."""
    modes = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if not target.endswith(f"{store_id.lower()}.sqlite"):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                flags = next(int(l.split()[1], 8) for l in info if l.startswith("flags:"))
        except (FileNotFoundError, StopIteration):
            continue  # closed meanwhile
        modes.append(flags & os.O_ACCMODE)
    return modes


def test_a_read_first_after_kill_9_sees_every_acknowledged_save(start_server):
    srv = start_server(name="readfirst")
    c = Client(make_channel(srv.address))
    sid = c.open(model=person_model())
    acked: dict[str, str] = {}  # object ID -> name
    lock = threading.Lock()
    stop = threading.Event()

    def write(w: Client, k: int):
        n = 0
        while not stop.is_set():
            name = f"w{k}-{n}"
            try:
                r = w.save(sid, inserts=[ob.Insert(temporary_id="p", entity="Person", values={"name": v(name)})])
            except grpc.RpcError:
                return
            with lock:
                acked[r.permanent_ids["p"]] = name
            n += 1

    clients = [Client(make_channel(srv.address)) for _ in range(3)]
    writers = [threading.Thread(target=write, args=(w, k), daemon=True) for k, w in enumerate(clients)]
    for t in writers: t.start()
    ubiq_harness.wait_until(lambda: len(acked) >= 60, 60, message="saves acknowledged")
    srv.kill()
    stop.set()
    for t in writers: t.join(30)
    for w in clients: w.channel.close()
    c.channel.close()
    with lock:
        expected = dict(acked)

    srv.start()
    c = Client(make_channel(srv.address))
    try:
        ids = list(expected)
        got = c.get(sid, ids)  # the first call on the store after the kill: a read
        assert list(got.missing_object_ids) == [], "acknowledged saves lost"
        assert {o.object_id: unpack(o.values["name"]) for o in got.objects} == expected
        assert c.current(sid).generation >= len(expected)
        modes = database_access_modes(srv.proc.pid, sid)
        assert modes and all(m == os.O_RDONLY for m in modes), f"only read connections on the file so far: {modes}"
        r = c.save(sid, inserts=[ob.Insert(temporary_id="p", entity="Person", values={"name": v("after")})])
        after = c.get(sid, [r.permanent_ids["p"]])
        assert [unpack(o.values["name"]) for o in after.objects] == ["after"]
        assert os.O_RDWR in database_access_modes(srv.proc.pid, sid), "the save opened the writer"
    finally:
        c.channel.close()
