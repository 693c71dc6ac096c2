"""The ubiquityd process contract: command line, the one stdout line, exit codes."""

from __future__ import annotations

import socket
import subprocess

import grpc
import pytest

from conftest import EXIT_BOUND_SECONDS, get_stats, make_channel, ping_ok
from ubiquity.v1 import admin_pb2, admin_pb2_grpc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stdout_is_exactly_the_listening_line(start_server):
    srv = start_server()
    ch = make_channel(srv.address)
    try:
        stub = admin_pb2_grpc.AdminStub(ch)
        stub.Ping(admin_pb2.PingRequest(payload=b"x"), timeout=10)
        with pytest.raises(grpc.RpcError):
            ch.unary_unary("/no.Such/Method")(b"", timeout=10)
    finally:
        ch.close()
    assert srv.stop(EXIT_BOUND_SECONDS) == 0
    lines = srv.stdout_path.read_bytes().splitlines()
    assert lines == [f"ubiquityd listening on 127.0.0.1:{srv.port}".encode()], lines


def test_fixed_port(start_server):
    port = _free_port()
    srv = start_server(port=port)
    assert srv.port == port
    ping_ok(srv.address)


def test_port_in_use_fails_fast(server_binary, tmp_path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        try:
            proc = subprocess.run(
                [str(server_binary), "--host", "127.0.0.1", "--port", str(port),
                 "--data-dir", str(tmp_path / "data")],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("ubiquityd kept running although its port was taken")
    assert proc.returncode != 0
    assert b"listening" not in proc.stdout, proc.stdout
    assert proc.stderr.strip(), "no error message on stderr"


@pytest.mark.parametrize("args", [["--no-such-flag"], ["--port", "not-a-number"],
                                  ["--max-receive-message-bytes", "-5"],
                                  ["--writer-cache-mib", "0"], ["--blocking-threads", "-1"],
                                  ["--checkpoint-threshold-mib", "0"], ["--reader-mmap-mib", "-1"],
                                  ["--reader-cache-mib", "-1"], ["--writer-nice", "-1"], ["--writer-nice", "20"],
                                  ["--checkpoint-threshold-unread-mib", "-1"], ["--idle-checkpoint-ms", "-1"]],
                         ids=["unknown-flag", "bad-port", "negative-limit",
                              "zero-writer-cache", "negative-blocking-threads", "zero-checkpoint-threshold",
                              "negative-reader-mmap", "negative-reader-cache", "negative-writer-nice",
                              "writer-nice-past-19", "negative-unread-threshold", "negative-idle-checkpoint"])
def test_bad_command_line_is_rejected(server_binary, tmp_path, args):
    try:
        proc = subprocess.run([str(server_binary), "--data-dir", str(tmp_path / "d"), *args],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ubiquityd {' '.join(args)} did not exit")
    assert proc.returncode != 0, proc.stdout
    assert b"listening" not in proc.stdout
    if args[0] in ("--writer-cache-mib", "--blocking-threads", "--checkpoint-threshold-mib", "--reader-mmap-mib",
                   "--reader-cache-mib", "--writer-nice", "--checkpoint-threshold-unread-mib", "--idle-checkpoint-ms"):
        # the message names the flag, so the operator knows what to fix
        assert args[0].encode() in proc.stderr, proc.stderr


def test_several_event_loops_share_the_port(start_server):
    srv = start_server(["--event-loops", "2"])
    channels = [make_channel(srv.address) for _ in range(8)]
    try:
        for i, ch in enumerate(channels):
            resp = admin_pb2_grpc.AdminStub(ch).Ping(
                admin_pb2.PingRequest(payload=str(i).encode()), timeout=10)
            assert resp.payload == str(i).encode()
        info = admin_pb2_grpc.AdminStub(channels[0]).GetServerInfo(
            admin_pb2.GetServerInfoRequest(), timeout=10)
        assert info.event_loops == 2
        # Counters are the whole process's, whichever loop a connection landed on.
        stats = get_stats(channels[0])
        assert stats.open_connections >= 8
        assert stats.calls_by_status[0] >= 8
    finally:
        for ch in channels:
            ch.close()
