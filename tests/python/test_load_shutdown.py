"""h2load against Admin.Ping (HTTP level), checked at gRPC level through the server's
own per-status call counters; and SIGTERM while calls are in flight."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading

import grpc
import pytest

import h2raw
from conftest import EXIT_BOUND_SECONDS, get_stats, make_channel
from ubiq_gen.grpc.testing import messages_pb2, test_pb2_grpc
from ubiq_harness import wait_until
from ubiquity.v1 import admin_pb2

H2LOAD_CALLS = 20000


def _h2load() -> str:
    path = shutil.which("h2load")
    if path is None:
        pytest.fail("h2load not found: install Debian's nghttp2-client (scripts/test does)")
    return path


def _parse_h2load(output: str) -> dict:
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", output)
    assert m, f"unexpected h2load output:\n{output}"
    keys = ["total", "started", "done", "succeeded", "failed", "errored", "timeout"]
    result = dict(zip(keys, map(int, m.groups())))
    s = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output)
    assert s, f"no status-code line in h2load output:\n{output}"
    result["2xx"] = int(s.group(1))
    return result


@pytest.mark.timeout(900)
@pytest.mark.parametrize("server_args,clients,streams,calls", [
    ([], 4, 16, H2LOAD_CALLS),                       # the scenario
    (["--event-loops", "2"], 4, 16, H2LOAD_CALLS),   # connections spread over loops
    ([], 64, 1, 6400),                               # many connections, one stream each
], ids=["c4-m16", "c4-m16-2loops", "c64-m1"])
def test_h2load_unary_pings(start_server, tmp_path, server_args, clients, streams, calls):
    h2load = _h2load()
    srv = start_server(server_args)
    body = tmp_path / "ping.bin"
    body.write_bytes(h2raw.grpc_frame(admin_pb2.PingRequest(payload=b"h2load").SerializeToString()))
    ch = make_channel(srv.address)
    try:
        before = get_stats(ch)
        cmd = [h2load, "-n", str(calls), "-c", str(clients), "-m", str(streams),
               "-H", "content-type: application/grpc", "-H", "te: trailers",
               "-d", str(body), f"http://127.0.0.1:{srv.port}/ubiquity.v1.Admin/Ping"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"h2load did not finish {calls} calls within 600 s:\n{e.stdout}")
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"h2load exited {proc.returncode}:\n{out}"
        result = _parse_h2load(out)
        assert result["succeeded"] == calls, out
        assert result["2xx"] == calls, out
        assert result["failed"] == result["errored"] == result["timeout"] == 0, out
        # h2load sees only HTTP 200; the server's counters say what grpc-status each got.
        after = get_stats(ch)
        ok_delta = after.calls_by_status[0] - before.calls_by_status[0]
        # +1: the first GetServerStats itself may complete after taking its snapshot.
        assert calls <= ok_delta <= calls + 1, (
            f"OK calls grew by {ok_delta}, expected {calls}; by status: "
            f"{dict(after.calls_by_status)}")
        failed = {code: after.calls_by_status[code] - before.calls_by_status.get(code, 0)
                  for code in after.calls_by_status if code != 0}
        assert not any(failed.values()), f"non-OK calls during h2load: {failed}"
        assert after.accepted_connections - before.accepted_connections >= clients
    finally:
        ch.close()


def test_sigterm_with_calls_in_flight(start_server):
    srv = start_server(["--shutdown-grace-seconds", "30"])
    ch = make_channel(srv.address)
    stub = test_pb2_grpc.TestServiceStub(ch)
    n_calls, n_responses = 6, 5
    # Each call takes ~1 s: 5 responses 200 ms apart.
    req = messages_pb2.StreamingOutputCallRequest(response_parameters=[
        messages_pb2.ResponseParameters(size=1000 + i, interval_us=200_000)
        for i in range(n_responses)])
    first_seen = threading.Semaphore(0)
    results: list = [None] * n_calls

    def run(i):
        try:
            call = stub.StreamingOutputCall(req, timeout=60)
            sizes = []
            for resp in call:
                sizes.append(len(resp.payload.body))
                if len(sizes) == 1:
                    first_seen.release()
            results[i] = (call.code(), sizes)
        except grpc.RpcError as e:
            first_seen.release()
            results[i] = (e.code(), e.details())

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n_calls)]
    try:
        for t in threads:
            t.start()
        # Every call is in flight (has its first response) before the signal.
        for _ in range(n_calls):
            assert first_seen.acquire(timeout=30), "calls did not start"
        srv.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=EXIT_BOUND_SECONDS)
        expected = [1000 + i for i in range(n_responses)]
        for i, r in enumerate(results):
            assert r == (grpc.StatusCode.OK, expected), f"call {i} ended with {r}"
        rc = srv.wait(EXIT_BOUND_SECONDS)
        assert rc == 0, f"ubiquityd exited {rc} after draining\n{srv.stderr_tail()}"
    finally:
        ch.close()


def test_sigterm_goaway_then_drain(start_server):
    """After SIGTERM the server sends GOAWAY(NO_ERROR) that keeps the in-flight call,
    the call completes, and the process exits 0."""
    srv = start_server(["--shutdown-grace-seconds", "30"])
    conn = h2raw.RawH2("127.0.0.1", srv.port)
    try:
        conn.preface()
        conn.start_reader()
        slow = messages_pb2.StreamingOutputCallRequest(response_parameters=[
            messages_pb2.ResponseParameters(size=10, interval_us=300_000) for _ in range(5)])
        sid = conn.unary("/grpc.testing.TestService/StreamingOutputCall", slow.SerializeToString())
        conn.wait_for(lambda c: len(c.streams[sid].data) > 0, 15, "first response")
        srv.send_signal(signal.SIGTERM)
        goaway = conn.wait_for(lambda c: c.goaway, 15, "GOAWAY after SIGTERM")
        assert goaway.error_code == h2raw.NO_ERROR
        assert goaway.last_stream_id >= sid, "GOAWAY would abandon the in-flight call"
        st = conn.wait_stream(sid, timeout=30)
        assert st.grpc_status == 0, st.header_blocks
        assert len(h2raw.grpc_messages(bytes(st.data))) == 5
        rc = srv.wait(EXIT_BOUND_SECONDS)
        assert rc == 0, f"exit code {rc}\n{srv.stderr_tail()}"
    finally:
        conn.close()


def test_sigint_is_graceful_too(start_server):
    srv = start_server()
    ch = make_channel(srv.address)
    try:
        assert get_stats(ch).open_connections >= 1
    finally:
        ch.close()
    srv.send_signal(signal.SIGINT)
    rc = srv.wait(EXIT_BOUND_SECONDS)
    assert rc == 0, f"exit code {rc} after SIGINT\n{srv.stderr_tail()}"


def test_idle_server_exits_promptly_on_sigterm(start_server):
    """With nothing in flight the drain has nothing to wait for: the process must not
    sit out its whole grace period (300 s here; the bound below is 60 s)."""
    srv = start_server(["--shutdown-grace-seconds", "300"])
    wait_until(lambda: srv.alive(), 5, message="server up")
    srv.send_signal(signal.SIGTERM)
    rc = srv.wait(60)
    assert rc == 0, f"exit code {rc}\n{srv.stderr_tail()}"


def test_new_call_during_drain_is_not_served(start_server):
    """Once draining, a new call on an existing connection is refused (UNAVAILABLE, or
    refused/ignored by HTTP/2 above the GOAWAY id), while the in-flight call finishes."""
    srv = start_server(["--shutdown-grace-seconds", "30"])
    conn = h2raw.RawH2("127.0.0.1", srv.port)
    try:
        conn.preface()
        conn.start_reader()
        slow = messages_pb2.StreamingOutputCallRequest(response_parameters=[
            messages_pb2.ResponseParameters(size=10, interval_us=300_000) for _ in range(4)])
        inflight = conn.unary("/grpc.testing.TestService/StreamingOutputCall",
                              slow.SerializeToString())
        conn.wait_for(lambda c: len(c.streams[inflight].data) > 0, 15, "first response")
        srv.send_signal(signal.SIGTERM)
        conn.wait_for(lambda c: c.goaway, 15, "GOAWAY after SIGTERM")
        late = conn.unary("/ubiquity.v1.Admin/Ping", admin_pb2.PingRequest().SerializeToString())
        st = conn.wait_stream(late, timeout=EXIT_BOUND_SECONDS)
        served = st.grpc_status == 0
        assert not served, f"a call started after GOAWAY was served: {st.header_blocks}"
        if st.grpc_status is not None:
            assert st.grpc_status == 14, st.header_blocks  # UNAVAILABLE
        done = conn.wait_stream(inflight, timeout=EXIT_BOUND_SECONDS)
        assert done.grpc_status == 0, done.header_blocks
        assert len(h2raw.grpc_messages(bytes(done.data))) == 4
        rc = srv.wait(EXIT_BOUND_SECONDS)
        assert rc == 0, f"exit code {rc}\n{srv.stderr_tail()}"
    finally:
        conn.close()


def test_health_check_during_drain_not_serving(start_server):
    """Between SIGTERM and exit, Check on a connection opened before the signal
    answers NOT_SERVING (or the call is refused) — never SERVING."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    srv = start_server(["--shutdown-grace-seconds", "30"])
    ch = make_channel(srv.address)
    try:
        health = health_pb2_grpc.HealthStub(ch)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == \
            health_pb2.HealthCheckResponse.SERVING
        # Keep the server draining for ~1.5 s with a call in flight.
        stub = test_pb2_grpc.TestServiceStub(ch)
        slow = messages_pb2.StreamingOutputCallRequest(response_parameters=[
            messages_pb2.ResponseParameters(size=1, interval_us=300_000) for _ in range(5)])
        call = stub.StreamingOutputCall(slow, timeout=60)
        next(call)
        watch = health.Watch(health_pb2.HealthCheckRequest(), timeout=60)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        srv.send_signal(signal.SIGTERM)
        # Ordered by the server's own announcement, not by time.
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
        try:
            status = health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.NOT_SERVING
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        assert len(list(call)) == 4
        watch.cancel()
        rc = srv.wait(EXIT_BOUND_SECONDS)
        assert rc == 0, f"exit code {rc}\n{srv.stderr_tail()}"
    finally:
        ch.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("idle_seconds", [0.2, 2.5])
def test_one_sigint_after_a_burst_of_blocking_calls_shuts_down(start_server, idle_seconds):
    """Exactly one SIGINT, sent while the server idles after a burst of `.blocking` calls
    (GetObjects on the worker pool, driven by ubiquity-load), starts the graceful shutdown and
    the process exits 0. (A lost first signal was once reported in this situation; see
    docs/threading.md rule 12.)"""
    import json
    import time

    import ubiq_harness

    try:
        load = str(ubiq_harness.find_load_binary())
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    srv = start_server()
    common = ["--target", srv.address, "--token", srv.token, "--store", "sigtest", "--objects", "2000", "--json", "--quiet",
              "--max-seconds", "300"]
    for workload, extra in (("prepare", ["--batch", "1000"]), ("point-fetch", ["-n", "3000", "-c", "4", "-m", "16"])):
        proc = subprocess.run([load, *common, "--workload", workload, *extra], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{workload}: {proc.stderr}"
        assert json.loads(proc.stdout.strip().splitlines()[-1])["errors"] == 0
    time.sleep(idle_seconds)
    srv.send_signal(signal.SIGINT)
    rc = srv.wait(EXIT_BOUND_SECONDS)
    log = srv.stderr_text()
    assert "graceful shutdown started" in log, log[-2000:]
    assert rc == 0, f"exit code {rc} after one SIGINT\n{log[-2000:]}"
