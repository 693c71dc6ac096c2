"""The `ubiq` command-line client against the real server: the README walkthrough, verbatim
(same commands, same example files), plus its error reporting."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from ubiq_harness import REPO_ROOT, find_server_binary


@pytest.fixture(scope="module")
def ubiq(server):
    binary = find_server_binary().parent / "ubiq"
    assert binary.is_file(), f"{binary} missing: `swift build` builds it"
    env = dict(os.environ, UBIQ_SERVER=server.address)

    def run(*args, ok=True):
        p = subprocess.run([str(binary), *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
        if ok:
            assert p.returncode == 0, f"ubiq {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
        return p
    return run


def test_readme_walkthrough(ubiq):
    store = f"notes-{uuid.uuid4().hex[:8]}"
    out = ubiq("store", "open", store).stdout
    assert f"store {store}" in out and "generation 0" in out
    out = ubiq("model", "register", "--store", store, "examples/notes-model.json").stdout
    assert "registered model" in out
    ann = ubiq("insert", "--store", store, "--entity", "Person",
               "--json", '{"name": "Ann", "age": 31, "email": "ann@example.com"}').stdout.split()[0]
    assert "/Person/p" in ann
    out = ubiq("save", "--store", store, "examples/notes-batch.json").stdout
    assert "saved, generation 2" in out and "bob →" in out
    table = ubiq("fetch", "--store", store, "--entity", "Person", "--predicate", "age > 30", "--sort", "name").stdout
    lines = table.strip().splitlines()
    assert lines[0].split()[:4] == ["id", "age", "email", "name"]
    assert [l.split()[-1] for l in lines[2:]] == ["Ann", "Bob"]
    notes = json.loads(ubiq("fetch", "--store", store, "--entity", "Note", "--json").stdout)
    (note,) = notes["objects"]
    assert note["values"]["title"] == "Buy milk" and note["values"]["createdAt"] == "2026-11-22T09:30:00Z"
    bob = note["relationships"]["owner"][0]
    assert "/Person/p" in bob
    out = ubiq("generation", "--store", store).stdout
    assert "generation 2" in out
    token = out.split("token ")[1].strip()
    # a read at that token keeps seeing generation 2 after more changes
    ubiq("update", "--store", store, "--json", '{"age": 50}', ann)
    ubiq("delete", "--store", store, bob)
    now = ubiq("fetch", "--store", store, "--entity", "Person", "--count").stdout.strip()
    then = ubiq("fetch", "--store", store, "--entity", "Person", "--count", "--at", token).stdout.strip()
    assert (now, then) == ("1", "2")
    assert ubiq("fetch", "--store", store, "--entity", "Note", "--count").stdout.strip() == "0"   # cascade


def test_cli_errors_are_clear_and_change_nothing(ubiq):
    store = f"notes-{uuid.uuid4().hex[:8]}"
    ubiq("store", "open", store)
    ubiq("model", "register", "--store", store, "examples/notes-model.json")
    bad = ubiq("insert", "--store", store, "--entity", "Person", "--json", '{"name": "x", "age": "old"}', ok=False)
    assert bad.returncode != 0 and "Person.age" in bad.stderr
    bad = ubiq("fetch", "--store", store, "--entity", "Person", "--predicate", "age >", ok=False)
    assert bad.returncode != 0 and "PREDICATE_SYNTAX" in bad.stderr and "column" in bad.stderr
    bad = ubiq("insert", "--store", store, "--entity", "Person", "--json", '{"age": 3}', ok=False)
    assert "VALIDATION_FAILED" in bad.stderr and "name" in bad.stderr
    bad = ubiq("fetch", "--store", f"missing-{uuid.uuid4().hex}", "--entity", "Person", ok=False)
    assert "NOT_FOUND" in bad.stderr
    assert "generation 0" in ubiq("generation", "--store", store).stdout
