"""An open store costs no threads of its own (issue 18, docs/threading.md rule 18): with many
stores open and each one written and read, the server's storage threads stay within the shared
pools' bounds, and every store still answers with its own data."""

from __future__ import annotations

import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import make_channel
from ubiq_client import Client, ob, person_model, v, values

STORES = 64
WRITER_THREADS = 8  # StorageConfiguration.writerThreads' default


def _storage_threads(pid: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (t / "comm").read_text().strip()
        except OSError:
            continue
        if name.startswith(("ubq-writer", "ubq-reader", "ubq-snapshots", "ubq-writeback")):
            key = re.sub(r"-\d+$", "", name)
            counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("writer_threads", [None, 2])
def test_many_open_stores_share_bounded_storage_threads(start_server, writer_threads):
    """`None`: the default bound; 2: `--writer-threads 2` holds four clients' saves to 64
    stores to two writer threads."""
    args = ["--max-open-stores", str(STORES + 16)]
    if writer_threads is not None:
        args += ["--writer-threads", str(writer_threads)]
    srv = start_server(args)
    clients = [Client(make_channel(srv.address)) for _ in range(4)]
    model = person_model()

    def one(i: int) -> None:
        c = clients[i % len(clients)]
        sid = c.open(f"threads-{i}", model)
        r = c.save(sid, inserts=[ob.Insert(temporary_id="p", entity="Person", values={"name": v(f"P{i}")})])
        got = c.get(sid, [r.permanent_ids["p"]])
        assert [values(o)["name"] for o in got.objects] == [f"P{i}"]

    with ThreadPoolExecutor(len(clients)) as pool:
        list(pool.map(one, range(STORES)))
    threads = _storage_threads(srv.proc.pid)
    cores = os.cpu_count() or 1
    # One thread (or four) per open store would be 64-256 here.
    assert 1 <= threads.get("ubq-writer", 0) <= (writer_threads or WRITER_THREADS), threads
    assert threads.get("ubq-reader", 0) <= cores, threads
    assert threads.get("ubq-snapshots", 0) <= 1 and threads.get("ubq-writeback", 0) <= 1, threads
    assert sum(threads.values()) < STORES, threads
    for c in clients:
        c.channel.close()
