"""The `ubiq` command-line client against the real server: the README walkthrough, verbatim
(same commands, same example files), plus its error reporting."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import uuid

import pytest

from ubiq_harness import REPO_ROOT, find_server_binary


@pytest.fixture(scope="module")
def ubiq(server):
    binary = find_server_binary().parent / "ubiq"
    assert binary.is_file(), f"{binary} missing: `swift build` builds it"
    # No token: ubiq signs in with the operator key in the server's data directory, as the
    # README walkthrough does with ./data (docs/accounts.md, "Local use").
    env = dict(os.environ, UBIQ_SERVER=server.address, UBIQ_DATA_DIR=str(server.data_dir))
    env.pop("UBIQ_TOKEN", None)

    def run(*args, ok=True, background=False):
        if background:  # a long-running command (watch): the caller reads its output as it comes
            return subprocess.Popen([str(binary), *args], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
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


def test_kv_get_set_delete_list(ubiq):
    p = f"cli{uuid.uuid4().hex[:8]}."
    assert ubiq("kv", "set", p + "theme", "dark").stdout.strip() == f"set {p}theme → version 1"
    got = ubiq("kv", "get", p + "theme")
    assert got.stdout == "dark\n" and "version 1" in got.stderr
    assert "version 2" in ubiq("kv", "set", "--expected-version", "1", p + "theme", "light").stdout
    bad = ubiq("kv", "set", "--expected-version", "1", p + "theme", "blue", ok=False)
    assert bad.returncode != 0 and "KEY_VERSION_CONFLICT" in bad.stderr and "at version 2" in bad.stderr
    bad = ubiq("kv", "set", "--create-only", p + "theme", "blue", ok=False)
    assert "KEY_VERSION_CONFLICT" in bad.stderr
    ubiq("kv", "set", "--base64", p + "blob", "AAEC")
    assert ubiq("kv", "get", "--base64", p + "blob").stdout.strip() == "AAEC"
    listed = ubiq("kv", "list", "--prefix", p)
    assert listed.stdout.splitlines() == [f"{p}blob  v1  3 B  AAEC", f"{p}theme  v2  5 B  light"]
    assert "keys" in listed.stderr and "bytes" in listed.stderr
    bad = ubiq("kv", "set", "a/b", "x", ok=False)
    assert "BAD_KEY" in bad.stderr and "path separator" in bad.stderr
    bad = ubiq("kv", "set", "k" * 200, "x", ok=False)
    assert "KEY_VALUE_QUOTA" in bad.stderr and "limit 128" in bad.stderr
    assert "deleted" in ubiq("kv", "delete", p + "theme").stdout
    assert "was not set" in ubiq("kv", "delete", p + "theme").stdout
    assert "KEY_NOT_FOUND" in ubiq("kv", "get", p + "theme", ok=False).stderr


class Lines:
    """A running process's stdout and stderr lines, as they arrive (reader threads; a test waits
    for the line it needs, with a bound against hangs)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.out: queue.Queue[str] = queue.Queue()
        self.err: queue.Queue[str] = queue.Queue()
        self.err_seen: list[str] = []
        for pipe, q in ((proc.stdout, self.out), (proc.stderr, self.err)):
            threading.Thread(target=lambda pipe=pipe, q=q: [q.put(line.rstrip("\n")) for line in pipe],
                             daemon=True).start()

    def next_out(self, timeout=30) -> str:
        try:
            return self.out.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no output line within {timeout} s; stderr so far: {self.err_seen}")

    def err_until(self, prefix: str, timeout=30) -> str:
        while True:
            try:
                line = self.err.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no stderr line starting {prefix!r} within {timeout} s; stderr so far: {self.err_seen}")
            self.err_seen.append(line)
            if line.startswith(prefix):
                return line


def change(line: str) -> dict:
    """One `ubiq watch` / `ubiq history` line: generation, time, author, kind, entity, object ID,
    changed properties (and values)."""
    parts = line.split("  ")
    assert len(parts) >= 7, line
    return {"generation": int(parts[0]), "time": parts[1], "author": parts[2], "kind": parts[3], "entity": parts[4],
            "id": parts[5], "properties": parts[6].split(","), "rest": parts[7:]}


def notes_store(ubiq) -> str:
    store = f"feed-{uuid.uuid4().hex[:8]}"
    ubiq("store", "open", store)
    ubiq("model", "register", "--store", store, "examples/notes-model.json")
    return store


def test_watch_prints_a_change_and_resumes_from_its_token_without_gap(ubiq):
    store = notes_store(ubiq)
    watch = Lines(ubiq("watch", "--store", store, background=True))
    try:
        watch.err_until("# caught up")
        ann = ubiq("insert", "--store", store, "--entity", "Person",
                   "--json", '{"name": "Ann", "age": 31}').stdout.split()[0]
        c = change(watch.next_out())
        assert (c["kind"], c["entity"], c["id"], c["author"]) == ("insert", "Person", ann, "ubiq"), c
        assert {"name", "age"} <= set(c["properties"]), c
        assert c["time"].endswith("Z") and c["time"][:4].isdigit(), c
        watch.proc.send_signal(signal.SIGINT)
        resume = watch.err_until("# resume: ")
        assert watch.proc.wait(timeout=30) == 130
    finally:
        if watch.proc.poll() is None:
            watch.proc.kill()
            watch.proc.wait()
    command = resume[len("# resume: "):].split()
    assert command[:5] == ["ubiq", "watch", "--store", store, "--from"], resume
    token = command[5]

    # Saved while nobody watched: the resumed watch prints exactly these, in order, and not Ann's insert.
    bob = ubiq("insert", "--store", store, "--entity", "Person", "--json", '{"name": "Bob", "age": 40}').stdout.split()[0]
    ubiq("update", "--store", store, "--json", '{"age": 32}', ann)
    out = ubiq("watch", "--store", store, "--from", token, "--count", "2", "--values").stdout.strip().splitlines()
    got = [change(line) for line in out]
    assert [(g["kind"], g["id"]) for g in got] == [("insert", bob), ("update", ann)], out
    assert got[1]["generation"] == got[0]["generation"] + 1 == c["generation"] + 2, out
    assert got[1]["properties"] == ["age"] and json.loads(got[1]["rest"][0]) == {"age": 32}, out
    assert json.loads(got[0]["rest"][0])["name"] == "Bob", out


def test_watch_rejects_a_bad_token_clearly(ubiq):
    store = notes_store(ubiq)
    bad = ubiq("watch", "--store", store, "--from", "zz", ok=False)
    assert bad.returncode != 0 and "not a hex token" in bad.stderr
    bad = ubiq("watch", "--store", store, "--from", "00" * 16, ok=False)
    assert bad.returncode != 0 and "INVALID_ARGUMENT" in bad.stderr, bad.stderr


def test_history_pages_through_every_transaction(ubiq):
    store = notes_store(ubiq)
    ids = [ubiq("insert", "--store", store, "--entity", "Person", "--json", f'{{"name": "p{i}", "age": {i}}}')
           .stdout.split()[0] for i in range(5)]
    full = ubiq("history", "--store", store, "--page-size", "2")
    lines = [change(line) for line in full.stdout.strip().splitlines()]
    assert [(c["kind"], c["id"]) for c in lines] == [("insert", i) for i in ids], full.stdout
    assert "5 transactions in 3 pages" in full.stderr, full.stderr

    first = ubiq("history", "--store", store, "--limit", "3", "--page-size", "2")
    assert [change(line)["id"] for line in first.stdout.strip().splitlines()] == ids[:3], first.stdout
    note = next(line for line in first.stderr.splitlines() if line.startswith("# next: "))
    rest = ubiq(*note[len("# next: ubiq "):].split())
    assert [change(line)["id"] for line in rest.stdout.strip().splitlines()] == ids[3:], rest.stdout

    none = ubiq("history", "--store", store, "--entity", "Note")
    assert none.stdout.strip() == "" and "0 transactions" in none.stderr, (none.stdout, none.stderr)


def test_walkthrough_signed_in_once_and_cached_the_session(ubiq, server):
    ubiq("store", "list")
    cache = server.data_dir / "ubiq-session.json"
    assert cache.is_file() and (cache.stat().st_mode & 0o777) == 0o600
    first = json.loads(cache.read_text())
    ubiq("store", "list")
    assert json.loads(cache.read_text()) == first, "the cached session was used, not a new sign-in"


def test_account_commands(ubiq):
    account = ubiq("account", "create", "--display-name", "CLI test").stdout.split()[0]
    assert account in ubiq("account", "list").stdout
    assert "CLI test" in ubiq("account", "get", account).stdout
    key = ubiq("account", "key", "create", account, "--scope", "store:only-this").stdout.strip()
    assert key.startswith("ubk_")
    token = ubiq("account", "signin", "--api-key", key, "--device-id", "cli").stdout.strip()
    assert token.startswith("ubs_")
    # the new account's session sees none of the default account's stores, and only its one store
    assert ubiq("store", "list", "--token", token).stdout.strip() == ""
    ubiq("store", "open", "only-this", "--token", token)
    denied = ubiq("store", "open", "another", "--token", token, ok=False)
    assert denied.returncode != 0 and "SCOPE_EXCEEDED" in denied.stderr
    out = ubiq("account", "key", "revoke", key[4:20]).stdout
    assert "1 session(s) ended" in out
    gone = ubiq("store", "list", "--token", token, ok=False)
    assert gone.returncode != 0 and "SESSION_REVOKED" in gone.stderr
    bad = ubiq("account", "list", "--operator-key-file", "/nonexistent", ok=False)
    assert bad.returncode != 0 and "operator key" in bad.stderr


def test_admin_backup_and_restore_one_store(ubiq, tmp_path):
    store = f"notes-{uuid.uuid4().hex[:8]}"
    sid = ubiq("store", "open", store).stdout.split("id ")[1].split()[0]
    ubiq("model", "register", "--store", store, "examples/notes-model.json")
    ubiq("insert", "--store", store, "--entity", "Person", "--json", '{"name": "Ann"}')
    out = ubiq("admin", "backup", "--to", str(tmp_path / "b"), "--store", sid).stdout
    assert sid in out and f"default/{store}" in out and "generation 1" in out and "backup of 1 store in" in out
    assert (tmp_path / "b" / "manifest.json").is_file()
    ubiq("insert", "--store", store, "--entity", "Person", "--json", '{"name": "Bob"}')
    bad = ubiq("admin", "restore", "--from", str(tmp_path / "b"), ok=False)
    assert bad.returncode != 0 and "STORE_EXISTS" in bad.stderr and "--replace" in bad.stderr
    assert ubiq("fetch", "--store", store, "--entity", "Person", "--count").stdout.strip() == "2"
    assert f"restored store {sid} at generation 1" in ubiq("admin", "restore", "--from", str(tmp_path / "b"), "--replace").stdout
    assert ubiq("fetch", "--store", store, "--entity", "Person", "--count").stdout.strip() == "1"
    bad = ubiq("admin", "backup", "--to", str(tmp_path / "b"), ok=False)
    assert "BACKUP_DIRECTORY_NOT_EMPTY" in bad.stderr
