"""The README's walkthroughs (sync and asyncio) run as written against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ubiq_harness

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(example: str, server: ubiq_harness.Ubiquityd) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / example), server.address], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, UBIQ_API_KEY=server.api_key or ""))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bad predicate: PREDICATE_SYNTAX fetch.predicate" in r.stdout
    return r.stdout


def test_walkthrough_runs(server: ubiq_harness.Ubiquityd) -> None:
    out = _run("walkthrough.py", server)
    assert "older than 35: ['Bob']" in out
    assert "conflict (MERGE_CONFLICT): store has age=31, we wanted 32" in out
    assert "Ann then: 30 now: 31" in out


def test_asyncio_walkthrough_runs(server: ubiq_harness.Ubiquityd) -> None:
    out = _run("walkthrough_aio.py", server)
    assert "seeded: True" in out
    assert "older than 35: ['Bob', 'Cid']" in out
    assert "feed: generation 1 2 change(s)" in out
    assert "key-value conflict: current version 1" in out
