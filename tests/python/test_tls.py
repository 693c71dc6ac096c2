"""TLS (issue 21): ubiquityd with --tls-cert/--tls-key serves HTTP/2 over TLS with ALPN h2,
optionally requires client certificates (--tls-client-ca), reloads its certificate on SIGHUP
without dropping open connections, and refuses what is not a TLS client speaking h2 while it
keeps serving everyone else. A CA and certificates are made for each test module with the
openssl CLI (tls_material, the `pki` fixture in conftest)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading

import grpc
import pytest

import h2raw
import tls_material
from conftest import EXIT_BOUND_SECONDS, channel_for, get_stats, make_channel
from test_load_shutdown import _parse_h2load
from ubiq_gen.grpc.testing import messages_pb2, test_pb2_grpc
from ubiq_harness import wait_until
from ubiquity.v1 import admin_pb2, admin_pb2_grpc

MiB = 1024 * 1024
# As test_abuse: failures this catches are unbounded growth, never allocator slack.
MEMORY_GROWTH_BOUND = 128 * MiB


def _creds(ca, client=None) -> grpc.ChannelCredentials:
    if client is None:
        return grpc.ssl_channel_credentials(root_certificates=ca.pem)
    return grpc.ssl_channel_credentials(root_certificates=ca.pem, private_key=client.key_pem,
                                        certificate_chain=client.pem)


def _tls_args(leaf) -> list[str]:
    return ["--tls-cert", str(leaf.cert), "--tls-key", str(leaf.key)]


def _ping(channel, payload: bytes) -> None:
    reply = admin_pb2_grpc.AdminStub(channel).Ping(admin_pb2.PingRequest(payload=payload), timeout=10)
    assert reply.payload == payload


def _ping_new_channel(srv, payload: bytes = b"still-serving") -> None:
    ch = channel_for(srv)
    try:
        _ping(ch, payload)
    finally:
        ch.close()


def _tls_connect(port: int, ca, alpn=("h2",), client=None) -> ssl.SSLSocket:
    """A Python TLS client (no HTTP/2): for what grpcio cannot show, such as ALPN and the
    certificate the server presented."""
    ctx = h2raw.client_tls_context(str(ca.cert), alpn)
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        return ctx.wrap_socket(raw, server_hostname="localhost")
    except BaseException:
        raw.close()
        raise


def test_unary_and_streaming_calls_over_tls(start_server, pki):
    srv = start_server(_tls_args(pki["server"]), credentials=_creds(pki["ca"]))
    ch = channel_for(srv)
    try:
        _ping(ch, b"over-tls")
        req = messages_pb2.StreamingOutputCallRequest(response_parameters=[
            messages_pb2.ResponseParameters(size=size) for size in (1, 20_000, 300_000)])
        sizes = [len(r.payload.body) for r in test_pb2_grpc.TestServiceStub(ch).StreamingOutputCall(req, timeout=30)]
        assert sizes == [1, 20_000, 300_000]
        # Client streaming: 1 MiB up, in pieces, over several TLS records.
        chunks = [messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=b"x" * 65_536))
                  for _ in range(16)]
        reply = test_pb2_grpc.TestServiceStub(ch).StreamingInputCall(iter(chunks), timeout=30)
        assert reply.aggregated_payload_size == 16 * 65_536
    finally:
        ch.close()
    with _tls_connect(srv.port, pki["ca"]) as s:
        assert s.selected_alpn_protocol() == "h2"
        assert s.version() in ("TLSv1.2", "TLSv1.3")


def test_h2load_over_tls(start_server, pki, tmp_path):
    h2load = shutil.which("h2load")
    if h2load is None:
        pytest.fail("h2load not found: install Debian's nghttp2-client (scripts/test does)")
    srv = start_server(_tls_args(pki["server"]), credentials=_creds(pki["ca"]))
    body = tmp_path / "ping.bin"
    body.write_bytes(h2raw.grpc_frame(admin_pb2.PingRequest(payload=b"h2load-tls").SerializeToString()))
    calls = 4000
    ch = channel_for(srv)
    try:
        before = get_stats(ch)
        proc = subprocess.run(
            [h2load, "-n", str(calls), "-c", "4", "-m", "16",
             "-H", "content-type: application/grpc", "-H", "te: trailers",
             "-d", str(body), f"https://127.0.0.1:{srv.port}/ubiquity.v1.Admin/Ping"],
            capture_output=True, text=True, timeout=300)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert "Application protocol: h2" in out, out
        result = _parse_h2load(out)
        assert result["succeeded"] == calls and result["2xx"] == calls, out
        after = get_stats(ch)
        assert after.calls_by_status[0] - before.calls_by_status[0] >= calls
    finally:
        ch.close()


def test_client_certificate_required_and_verified(start_server, pki):
    args = _tls_args(pki["server"]) + ["--tls-client-ca", str(pki["ca"].cert)]
    srv = start_server(args, credentials=_creds(pki["ca"], pki["client"]))
    _ping_new_channel(srv, b"mutual")
    for name, creds in [("no client certificate", _creds(pki["ca"])),
                        ("a certificate from another CA", _creds(pki["ca"], pki["client_other"]))]:
        ch = grpc.secure_channel(srv.address, creds, options=[
            ("grpc.ssl_target_name_override", "localhost"), ("grpc.use_local_subchannel_pool", 1)])
        try:
            with pytest.raises(grpc.RpcError) as err:
                _ping(ch, b"refused")
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE, f"{name}: {err.value}"
        finally:
            ch.close()
    # The same refusals seen at the TLS level (TLS 1.3 reports them after the client's Finished).
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with _tls_connect(srv.port, pki["ca"]) as s:
            s.sendall(h2raw.PREFACE)
            s.recv(1)
    _ping_new_channel(srv, b"still-serving")


def test_sighup_reloads_certificate_and_keeps_open_connections(start_server, pki, tmp_path):
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(pki["server"].cert, cert)
    shutil.copy(pki["server"].key, key)
    srv = start_server(["--tls-cert", str(cert), "--tls-key", str(key)], credentials=_creds(pki["ca"]))
    old = make_channel(srv.address, credentials=_creds(pki["ca"]))
    try:
        _ping(old, b"before")
        accepted = get_stats(old).accepted_connections
        shutil.copy(pki["server_other"].cert, cert)
        shutil.copy(pki["server_other"].key, key)
        srv.send_signal(signal.SIGHUP)
        wait_until(lambda: "TLS certificate reloaded" in srv.stderr_text(), 15, message="the reload log line")
        # New handshakes get the new certificate: the old CA no longer verifies it ...
        with pytest.raises(ssl.SSLCertVerificationError):
            _tls_connect(srv.port, pki["ca"]).close()
        with _tls_connect(srv.port, pki["other_ca"]) as s:
            assert s.getpeercert(binary_form=True) == ssl.PEM_cert_to_DER_cert(pki["server_other"].cert.read_text())
        # ... while the connection opened before the reload goes on: a reconnect could not
        # verify the new certificate with the old CA, so these calls prove it was not dropped.
        _ping(old, b"after")
        _ping(old, b"after-again")
        srv.credentials = _creds(pki["other_ca"])
        # A file that no longer loads: the reload fails and the current certificate stays.
        key.write_text("not a key\n")
        srv.send_signal(signal.SIGHUP)
        wait_until(lambda: "TLS reload failed" in srv.stderr_text(), 15, message="the failed-reload log line")
        _ping_new_channel(srv, b"previous-certificate-kept")
        assert get_stats(old).accepted_connections > accepted
    finally:
        old.close()


@pytest.mark.parametrize("alpn", [("http/1.1",), (), ("h2c", "spdy/3")], ids=["http1", "none", "h2c"])
def test_client_without_h2_alpn_is_refused(start_server, pki, alpn):
    srv = start_server(_tls_args(pki["server"]), credentials=_creds(pki["ca"]))
    with pytest.raises(ssl.SSLError) as err:
        _tls_connect(srv.port, pki["ca"], alpn=alpn).close()
    assert "NO_APPLICATION_PROTOCOL" in str(err.value).upper() or "ALERT" in str(err.value).upper(), err.value
    _ping_new_channel(srv)


def test_plaintext_client_on_tls_port_is_closed(start_server, pki):
    srv = start_server(_tls_args(pki["server"]), credentials=_creds(pki["ca"]))
    # grpcio over h2c: the call fails ...
    ch = grpc.insecure_channel(srv.address, options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        with pytest.raises(grpc.RpcError) as err:
            _ping(ch, b"plaintext")
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        ch.close()
    # ... and a raw HTTP/2 preface gets the connection closed (at most an alert back).
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(h2raw.PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        assert len(got) < 64 and (not got or got[0] == 0x15), got  # 0x15: a TLS alert record
    _ping_new_channel(srv)


def test_handshake_that_never_finishes_is_closed_by_the_handshake_timeout(start_server, pki):
    srv = start_server(_tls_args(pki["server"]) + ["--handshake-timeout-ms", "500"],
                       credentials=_creds(pki["ca"]))
    ch = channel_for(srv)
    try:
        before = get_stats(ch).timed_out_connections
        # One client sends nothing; one sends the first bytes of a ClientHello and stops.
        silent = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        partial = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        try:
            partial.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
            for s in (silent, partial):
                assert s.recv(1) == b""  # the server closed it
            wait_until(lambda: get_stats(ch).timed_out_connections - before >= 2, 15,
                       message="both stalled handshakes counted as timed out")
        finally:
            silent.close()
            partial.close()
        _ping(ch, b"still-serving")
    finally:
        ch.close()


def test_flood_of_handshakes_leaves_server_serving_with_bounded_memory(start_server, pki):
    srv = start_server(_tls_args(pki["server"]), credentials=_creds(pki["ca"]))
    ch = channel_for(srv)
    errors: list[str] = []
    try:
        _ping(ch, b"warm")
        baseline = srv.rss_bytes()
        stop = threading.Event()

        def bystander():
            n = 0
            while not stop.is_set():
                try:
                    _ping(ch, b"bystander-%d" % n)
                except grpc.RpcError as e:
                    errors.append(str(e))
                n += 1

        t = threading.Thread(target=bystander, daemon=True)
        t.start()
        ctx = h2raw.client_tls_context(str(pki["ca"].cert))

        def flood(n: int):
            for i in range(n):
                raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                if i % 2:
                    # Half the clients complete the handshake and vanish.
                    with ctx.wrap_socket(raw, server_hostname="localhost"):
                        pass
                else:
                    # The others send a ClientHello's first record and hang up.
                    raw.sendall(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00")
                    raw.close()

        floods = [threading.Thread(target=flood, args=(150,)) for _ in range(4)]
        for f in floods:
            f.start()
        for f in floods:
            f.join(timeout=300)
        stop.set()
        t.join(timeout=30)
        assert not errors, errors[:3]
        grown = srv.rss_bytes() - baseline
        assert grown < MEMORY_GROWTH_BOUND, f"RSS grew by {grown / MiB:.1f} MiB over the flood"
        wait_until(lambda: get_stats(ch).open_connections <= 1, 15,
                   message="every flooding connection released")
        assert get_stats(ch).accepted_connections >= 600
        _ping(ch, b"after-flood")
    finally:
        ch.close()


def test_plaintext_on_a_non_loopback_address_needs_a_flag(server_binary, tmp_path):
    proc = subprocess.run([str(server_binary), "--host", "0.0.0.0", "--port", "0",
                           "--data-dir", str(tmp_path / "refused")],
                          capture_output=True, text=True, timeout=EXIT_BOUND_SECONDS)
    assert proc.returncode != 0
    assert "not a loopback address" in proc.stderr and "--allow-plaintext" in proc.stderr, proc.stderr
    # With the flag it serves, and warns. (Loopback stays plaintext by default: every other test.)
    stderr_path = tmp_path / "allowed.stderr"
    with open(stderr_path, "wb") as err:
        allowed = subprocess.Popen([str(server_binary), "--host", "0.0.0.0", "--port", "0", "--allow-plaintext",
                                    "--data-dir", str(tmp_path / "allowed")],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
    try:
        line = allowed.stdout.readline()
        assert line.startswith(b"ubiquityd listening on 0.0.0.0:"), line
        port = int(line.strip().rsplit(b":", 1)[1])
        assert b"serving plaintext h2c on a non-loopback address" in stderr_path.read_bytes()
        ch = make_channel(f"127.0.0.1:{port}")
        try:
            _ping(ch, b"allowed")
        finally:
            ch.close()
    finally:
        allowed.terminate()
        assert allowed.wait(timeout=EXIT_BOUND_SECONDS) == 0


def _ubiq(srv, *args, env=None):
    """`ubiq` against `srv`, signing in with the operator key in its data directory."""
    from ubiq_harness import find_server_binary
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UBIQ_", "UBIQUITY_"))}
    env.update(UBIQ_SERVER=srv.address, UBIQ_DATA_DIR=str(srv.data_dir), **extra)
    return subprocess.run([str(find_server_binary().parent / "ubiq"), *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_ubiq_commands_speak_tls_with_client_certificates(start_server, pki):
    """Every `ubiq` command takes --tls-ca / --tls-cert / --tls-key (ServerOptions), not only
    `health`: a data command (signs in first), an operator command and health, against a server
    that requires client certificates."""
    args = _tls_args(pki["server"]) + ["--tls-client-ca", str(pki["ca"].cert)]
    srv = start_server(args, credentials=_creds(pki["ca"], pki["client"]))
    tls = ["--tls-ca", str(pki["ca"].cert), "--tls-cert", str(pki["client"].cert),
           "--tls-key", str(pki["client"].key)]
    out = _ubiq(srv, "store", "open", "over-tls", *tls)
    assert out.returncode == 0 and "store over-tls" in out.stdout, out
    out = _ubiq(srv, "account", "list", *tls)
    assert out.returncode == 0 and out.stdout.strip(), out
    out = _ubiq(srv, "health", *tls)
    assert out.returncode == 0 and out.stdout.strip() == "SERVING", out
    # The same from the environment (containers).
    out = _ubiq(srv, "generation", "--store", "over-tls",
                env=dict(UBIQ_TLS_CA=tls[1], UBIQ_TLS_CERT=tls[3], UBIQ_TLS_KEY=tls[5]))
    assert out.returncode == 0 and "generation 0" in out.stdout, out
    # Refusals: no client certificate, a certificate from another CA, plaintext on the TLS port.
    other = ["--tls-ca", str(pki["ca"].cert), "--tls-cert", str(pki["client_other"].cert),
             "--tls-key", str(pki["client_other"].key)]
    for name, flags in [("no client certificate", tls[:2]), ("another CA's certificate", other),
                        ("plaintext", [])]:
        out = _ubiq(srv, "store", "open", "over-tls", "--timeout", "5", *flags)
        assert out.returncode != 0 and "over-tls" not in out.stdout, (name, out)
    _ping_new_channel(srv)


def test_ubiq_tls_flags_are_checked_before_connecting(start_server, pki):
    srv = start_server(_tls_args(pki["server"]), credentials=_creds(pki["ca"]))
    out = _ubiq(srv, "store", "open", "x", "--tls-ca", str(pki["ca"].cert), "--tls-cert", str(pki["client"].cert))
    assert out.returncode == 64 and "--tls-cert and --tls-key go together" in out.stderr, out
    out = _ubiq(srv, "store", "open", "x", "--tls-ca", str(pki["dir"] / "missing.pem"))
    assert out.returncode == 1 and "missing.pem" in out.stderr, out
    # Only the server's CA is needed without client certificates.
    out = _ubiq(srv, "store", "open", "x", "--tls-ca", str(pki["ca"].cert))
    assert out.returncode == 0 and "store x" in out.stdout, out
