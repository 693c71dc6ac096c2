"""ubiquity-load, the project's own load generator (libuv + nghttp2 client), against a real
ubiquityd: every call it reports is a call the server counted, with the same status.

No speed is asserted here (SPEC §6: speed is measured by scripts/bench, never in tests); time
bounds only guard against hangs.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import ubiq_harness
from conftest import get_stats, make_channel

REQUIRED_KEYS = {"workload", "system", "connections", "streams", "requests", "seconds", "throughput",
                 "p50_ms", "p90_ms", "p99_ms", "errors"}


@pytest.fixture(scope="module")
def load_binary():
    try:
        return ubiq_harness.find_load_binary()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


def _run(load_binary, *args, timeout=600):
    # the target's session (docs/accounts.md), as UBIQ_TOKEN; ping (the default workload) calls
    # the open Admin service, and signing in there would add calls to the counts compared
    target = args[args.index("--target") + 1] if "--target" in args else ""
    workload = args[args.index("--workload") + 1] if "--workload" in args else "ping"
    env = dict(os.environ)
    env.pop("UBIQ_TOKEN", None)
    token = ubiq_harness.session_token(target) if workload != "ping" else None
    if token:
        env["UBIQ_TOKEN"] = token
    try:
        return subprocess.run([str(load_binary), *args], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"ubiquity-load did not finish within {timeout} s: {e.stdout} {e.stderr}")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("server_args,connections,streams,threads,calls", [
    ([], 2, 8, 1, 3000),
    (["--event-loops", "2"], 3, 5, 2, 2001),   # uneven shares, connections over two generator loops
    ([], 1, 1, 1, 500),                        # one call at a time
], ids=["c2-m8", "c3-m5-t2-2loops", "c1-m1"])
def test_ping_counts_agree_with_the_server(start_server, load_binary, server_args, connections, streams,
                                           threads, calls):
    srv = start_server(server_args)
    ch = make_channel(srv.address)
    try:
        before = get_stats(ch)
        proc = _run(load_binary, "--target", srv.address, "--workload", "ping", "-n", str(calls),
                    "-c", str(connections), "-m", str(streams), "--threads", str(threads),
                    "--payload", "16", "--json", "--quiet", "--max-seconds", "300")
        assert proc.returncode == 0, f"ubiquity-load exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert REQUIRED_KEYS <= report.keys(), report
        assert report["workload"] == "ping"
        assert report["connections"] == connections and report["streams"] == streams
        assert report["requests"] == calls, report
        assert report["ok"] == calls and report["errors"] == 0 and report["errors_by_status"] == {}, report
        assert report["timed_out"] is False
        assert 0 < report["p50_ms"] <= report["p90_ms"] <= report["p99_ms"], report

        after = get_stats(ch)
        ok_delta = after.calls_by_status[0] - before.calls_by_status[0]
        # +1: the first GetServerStats itself may complete after taking its snapshot.
        assert calls <= ok_delta <= calls + 1, (
            f"the server counted {ok_delta} OK calls, ubiquity-load {calls}; by status: {dict(after.calls_by_status)}")
        failed = {code: after.calls_by_status[code] - before.calls_by_status.get(code, 0)
                  for code in after.calls_by_status if code != 0}
        assert not any(failed.values()), f"non-OK calls on the server: {failed}"
        assert after.accepted_connections - before.accepted_connections >= connections
    finally:
        ch.close()


def test_text_report_and_duration_bound(start_server, load_binary):
    srv = start_server()
    proc = _run(load_binary, "--target", srv.address, "--duration", "0.5", "-c", "1", "-m", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "calls" in proc.stdout and "latency ms" in proc.stdout and "0 errors" in proc.stdout, proc.stdout


def test_unreachable_server_fails_clearly(load_binary):
    # Port 1 on loopback: nothing listens there (and nobody may bind it without root).
    proc = _run(load_binary, "--target", "127.0.0.1:1", "-n", "10", timeout=60)
    assert proc.returncode != 0
    assert "cannot connect to 127.0.0.1:1" in proc.stderr, proc.stderr


def test_stores_workloads_need_prepared_data(start_server, load_binary):
    srv = start_server()
    proc = _run(load_binary, "--target", srv.address, "--workload", "point-fetch", "-n", "1", "--store", "empty",
                timeout=60)
    assert proc.returncode != 0
    assert "--workload prepare" in proc.stderr, proc.stderr


@pytest.mark.timeout(600)
def test_stores_workloads_against_prepared_data(start_server, load_binary):
    srv = start_server()
    common = ["--target", srv.address, "--store", "loadtest", "--objects", "2000", "--json", "--quiet",
              "--max-seconds", "300"]
    prep = _run(load_binary, *common, "--workload", "prepare", "--batch", "500")
    assert prep.returncode == 0, prep.stderr
    assert json.loads(prep.stdout)["requests"] == 4  # 2000 objects, 500 per BatchInsert

    ch = make_channel(srv.address)
    try:
        for workload, calls in (("point-fetch", 300), ("save100", 6), ("mixed", 100)):
            before = get_stats(ch)
            proc = _run(load_binary, *common, "--workload", workload, "-n", str(calls), "-c", "2", "-m", "2")
            assert proc.returncode == 0, f"{workload}: {proc.stderr}"
            report = json.loads(proc.stdout.strip().splitlines()[-1])
            assert report["requests"] == calls and report["errors"] == 0, report
            after = get_stats(ch)
            ok_delta = after.calls_by_status[0] - before.calls_by_status[0]
            # Up to +3: the first stats call, and the set-up calls (OpenStore, a GetObjects check).
            assert calls <= ok_delta <= calls + 4, (workload, ok_delta, dict(after.calls_by_status))
    finally:
        ch.close()

    # Predicate fetches need the query layer: either they run cleanly, or the generator says
    # plainly that this server cannot run them yet, never a run full of errors.
    proc = _run(load_binary, *common, "--workload", "predicate-fetch", "-n", "50")
    if proc.returncode == 0:
        assert json.loads(proc.stdout.strip().splitlines()[-1])["errors"] == 0
    else:
        assert "n/a — this server cannot run predicate fetches yet" in proc.stderr, proc.stderr


@pytest.mark.timeout(300)
def test_save100_into_an_empty_store(start_server, load_binary):
    """scripts/bench's W2 goal row: `prepare --objects 0` makes an empty store, save100 fills it;
    fetch workloads refuse --objects 0 rather than pick keys among no objects."""
    import ubiq_client as uc
    from ubiquity.v1 import objects_pb2 as ob

    srv = start_server()
    common = ["--target", srv.address, "--store", "w2-empty", "--objects", "0", "--json", "--quiet",
              "--max-seconds", "200"]
    for _ in range(2):  # the second prepare destroys and recreates the store: empty again
        prep = _run(load_binary, *common, "--workload", "prepare")
        assert prep.returncode == 0, prep.stderr
    proc = _run(load_binary, *common, "--workload", "save100", "-n", "7", "-c", "2", "-m", "2")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["errors"] == 0

    ch = make_channel(srv.address)
    try:
        client = uc.Client(ch)
        sid = client.open("w2-empty")
        counted = client.fetch(sid, "Item", result_type=ob.RESULT_TYPE_COUNT)
        assert counted.count == 700, counted
    finally:
        ch.close()

    refused = _run(load_binary, *common, "--workload", "point-fetch", "-n", "1")
    assert refused.returncode != 0
    assert "--objects 0" in refused.stderr and "point-fetch" in refused.stderr, refused.stderr


def _history_generations(address: str, store_name: str, author: str) -> list[int]:
    """Generations of `author`'s transactions in the store's history (FetchHistory, paged)."""
    from ubiquity.v1 import changes_pb2, changes_pb2_grpc, stores_pb2, stores_pb2_grpc
    ch = make_channel(address)
    try:
        store = stores_pb2_grpc.StoresStub(ch).OpenStore(
            stores_pb2.OpenStoreRequest(name=store_name, must_exist=True), timeout=10).store
        changes = changes_pb2_grpc.ChangesStub(ch)
        req = changes_pb2.FetchHistoryRequest(store_id=store.store_id, page_size=1000)
        getattr(req, "from").oldest = True
        out = []
        while True:
            page = changes.FetchHistory(req, timeout=30)
            out += [t.generation for t in page.transactions if t.author == author]
            if not page.has_more:
                return out
            getattr(req, "from").token = page.next_token
    finally:
        ch.close()


@pytest.mark.timeout(300)
def test_fanout_receives_every_save_on_every_subscription(start_server, load_binary):
    """W5's driver: every acknowledged save reaches every subscription exactly once, so the
    benchmark's latency figures are about real deliveries; its saves are real transactions."""
    srv = start_server()
    subscribers, connections = 12, 3
    proc = _run(load_binary, "--target", srv.address, "--workload", "fanout", "--store", "w5-test",
                "--subscribers", str(subscribers), "-c", str(connections), "--threads", "2",
                "--rate", "200", "--duration", "1", "--server-pid", str(srv.proc.pid), "--json", "--quiet",
                timeout=240)
    assert proc.returncode == 0, f"ubiquity-load exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["workload"] == "fanout" and report["subscribers"] == subscribers, report
    saves = report["saves"]
    assert saves >= 50 and report["save_errors"] == 0 and report["saves_without_generation"] == 0, report
    assert report["expected_deliveries"] == saves * subscribers, report
    assert report["deliveries"] == saves * subscribers and report["missing"] == 0, report
    assert report["duplicates"] == 0 and report["ended_early"] == 0 and report["malformed"] == 0, report
    assert report["drain_timed_out"] is False, report
    assert 0 <= report["p50_ms"] <= report["p99_ms"] <= report["p999_ms"], report
    assert report["from_start_p50_ms"] >= report["p50_ms"], report
    # Read from /proc of the real server process.
    assert report["rss_before_kib"] > 0 and report["rss_subscribed_kib"] > 0, report
    assert report["server_cpu_seconds"] is not None, report

    # Each acknowledged save is one transaction in the store's history, by the writer.
    generations = _history_generations(srv.address, "w5-test", "ubiquity-load-writer")
    assert len(generations) == saves and len(set(generations)) == saves, (len(generations), saves)


@pytest.mark.timeout(300)
def test_many_accounts_prepares_accounts_and_drives_their_sessions(start_server, load_binary, tmp_path):
    """W6's driver (scripts/bench --only w6), with small counts: prepare-accounts makes accounts
    with a session and a filled store each; many-accounts reports its fields, and its saves land in
    the stores of the accounts whose sessions sent them. --max-open-stores 4 < the accounts, so the
    rotating active set makes the server close stores and open them again."""
    import stat

    import ubiq_client as uc
    from ubiquity.v1 import objects_pb2 as ob
    from ubiquity.v1 import stores_pb2 as st

    srv = start_server(["--max-open-stores", "4"])
    accounts, objects, file = 12, 20, tmp_path / "accounts.tsv"
    prep = _run(load_binary, "--target", srv.address, "--workload", "prepare-accounts", "--accounts", str(accounts),
                "--objects", str(objects), "--setup-concurrency", "3", "--accounts-file", str(file),
                "--operator-key-file", str(srv.data_dir / "operator.key"), "--json", "--quiet", timeout=240)
    assert prep.returncode == 0, f"ubiquity-load exited {prep.returncode}:\n{prep.stdout}\n{prep.stderr}"
    setup = json.loads(prep.stdout.strip().splitlines()[-1])
    assert setup["accounts"] == accounts and setup["objects_per_store"] == objects, setup
    assert setup["accounts_per_s"] > 0 and setup["stores_per_s"] > 0, setup
    assert stat.S_IMODE(file.stat().st_mode) == 0o600  # it holds session tokens
    lines = [line.split("\t") for line in file.read_text().splitlines()]
    assert len(lines) == accounts and len({store for store, _ in lines}) == accounts, lines

    # 3 active, one joining every 10 calls: 80 calls stay within the first pass over the accounts
    # (9 joins × 10 calls), so the saves are exactly every 5th call that is not a joiner's first.
    calls = 80
    proc = _run(load_binary, "--target", srv.address, "--workload", "many-accounts", "--accounts-file", str(file),
                "--objects", str(objects), "--active", "3", "--rotate-every", "10", "--save-every", "5",
                "-n", str(calls), "-c", "2", "-m", "2", "--server-pid", str(srv.pid), "--json", "--quiet",
                "--max-seconds", "200", timeout=240)
    assert proc.returncode == 0, f"ubiquity-load exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert REQUIRED_KEYS <= report.keys(), report
    assert report["workload"] == "many-accounts", report
    assert report["requests"] == calls and report["ok"] == calls and report["errors"] == 0, report
    assert report["cold_calls"] == 7, report  # the joins at calls 10, 20, ..., 70
    assert 0 < report["cold_p50_ms"] <= report["cold_p99_ms"] <= report["cold_max_ms"], report
    assert report["active_accounts"] == 3 and report["rotate_every_calls"] == 10, report
    for key in ("server_rss_peak_kib", "server_rss_end_kib", "server_threads_peak", "server_threads_end",
                "server_fds_peak", "server_fds_end"):
        assert report[key] > 0, (key, report)
    assert report["server_rss_peak_kib"] >= report["server_rss_end_kib"], report

    # Every save went into its own account's store, over that account's session.
    ch = make_channel(srv.address)
    try:
        added = 0
        for store, session in lines:
            counted = uc.Client(ch).stores.Fetch(
                st.FetchRequest(store_id=store, fetch=ob.FetchSpec(entity="Item", result_type=ob.RESULT_TYPE_COUNT)),
                metadata=[("authorization", f"Bearer {session}")], timeout=30)
            assert counted.count >= objects, (store, counted)
            added += counted.count - objects
        assert added == (calls - report["cold_calls"]) // 5, added
    finally:
        ch.close()
