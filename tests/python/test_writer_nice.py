"""--writer-nice: each store's writer thread runs at that nice value (that thread only), and saves
still commit while Fetch keeps every core busy. No speed is asserted (SPEC §6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ubiq_harness


def _thread_nices(pid: int) -> list[int]:
    out = []
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (t / "stat").read_text()
        except OSError:
            continue
        # fields after the ")" closing the thread name: state is field 3, nice field 19
        out.append(int(stat.rsplit(")", 1)[1].split()[16]))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
@pytest.mark.timeout(600)
def test_niced_writer_still_commits_under_read_load(start_server):
    load = ubiq_harness.find_load_binary()
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base > 15:
        pytest.skip("tests already run at nice > 15")
    srv = start_server(["--writer-nice", "17"])
    prep = subprocess.run([str(load), "--target", srv.address, "--token", srv.token, "--workload", "prepare", "--objects", "3000",
                           "--store", "nice", "--quiet"], capture_output=True, text=True, timeout=300)
    assert prep.returncode == 0, prep.stderr
    # The store is open, so its writer thread exists: exactly one thread runs at 17.
    assert _thread_nices(srv.proc.pid).count(17) == 1, _thread_nices(srv.proc.pid)
    proc = subprocess.run([str(load), "--target", srv.address, "--token", srv.token, "--workload", "pinned-fetch", "--objects", "3000",
                           "--store", "nice", "-c", "2", "-m", "8", "-d", "3", "--json", "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["errors"] == 0, report
    # Saves of 100 objects ran on their own connection meanwhile, and each one committed.
    assert report["background_calls"] > 0 and report["background_errors"] == 0, report
    nices = _thread_nices(srv.proc.pid)
    assert nices.count(17) == 1, nices
    assert base in nices, nices  # the other threads keep the process's priority
