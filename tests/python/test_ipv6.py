"""Listening on IPv6 loopback: grpcio reaches the server at [::1] and the stdout line says so."""

from __future__ import annotations

import socket
import subprocess
import time

import grpc
import pytest

from conftest import EXIT_BOUND_SECONDS
from ubiquity.v1 import admin_pb2, admin_pb2_grpc


def _ipv6_loopback_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback_available(), reason="this machine has no IPv6 loopback")
def test_ipv6_loopback_with_two_loops(server_binary, tmp_path):
    out = tmp_path / "stdout"
    with open(out, "wb") as stdout, open(tmp_path / "stderr", "wb") as stderr:
        proc = subprocess.Popen(
            [str(server_binary), "--host", "::1", "--port", "0", "--event-loops", "2",
             "--data-dir", str(tmp_path / "data")],
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + 30
        line = b""
        while time.monotonic() < deadline and b"\n" not in line:
            line = out.read_bytes()
            time.sleep(0.05)
        assert line.startswith(b"ubiquityd listening on [::1]:"), line
        port = int(line.strip().rsplit(b":", 1)[1])
        # Several connections, so both loops (SO_REUSEPORT) are likely to take some.
        for i in range(6):
            with grpc.insecure_channel(f"[::1]:{port}") as ch:
                reply = admin_pb2_grpc.AdminStub(ch).Ping(admin_pb2.PingRequest(payload=b"v6-%d" % i), timeout=10)
                assert reply.payload == b"v6-%d" % i
    finally:
        proc.terminate()
        assert proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
