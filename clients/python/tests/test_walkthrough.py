"""The README's walkthrough runs as written against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ubiq_harness

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "walkthrough.py"


def test_walkthrough_runs(server: ubiq_harness.Ubiquityd) -> None:
    r = subprocess.run([sys.executable, str(EXAMPLE), server.address], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, UBIQ_API_KEY=server.api_key or ""))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "older than 35: ['Bob']" in r.stdout
    assert "conflict (MERGE_CONFLICT): store has age=31, we wanted 32" in r.stdout
    assert "Ann then: 30 now: 31" in r.stdout
    assert "bad predicate: PREDICATE_SYNTAX fetch.predicate" in r.stdout


EXAMPLE_AIO = EXAMPLE.with_name("walkthrough_aio.py")


def test_asyncio_walkthrough_runs(server: ubiq_harness.Ubiquityd) -> None:
    r = subprocess.run([sys.executable, str(EXAMPLE_AIO), server.address], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, UBIQ_API_KEY=server.api_key or ""))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "seeded: True" in r.stdout
    assert "older than 35: ['Bob', 'Cid']" in r.stdout
    assert "feed: generation 1 2 change(s)" in r.stdout
    assert "key-value conflict: current version 1" in r.stdout
    assert "bad predicate: PREDICATE_SYNTAX fetch.predicate" in r.stdout
