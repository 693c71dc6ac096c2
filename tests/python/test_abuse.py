"""Hostile and broken peers (SPEC §3 transport paragraph, §5 "no input crashes the
process"). Each test runs against its own ubiquityd and checks, while and after the
abuse runs, that:
  - the process stays up,
  - its resident memory stays within a generous bound of where it started,
  - a second, well-behaved grpcio client keeps being served the whole time,
  - the server exits 0 on SIGTERM afterwards (the start_server fixture checks that).

Every test runs twice: over h2c and over TLS (`abuse_server`), since a TLS connection has
buffers and a read path of its own between the socket and HTTP/2 (decrypted input batched
into one HTTP/2 read, encrypted output queued per flush) that must stay bounded too. Over
TLS the abuse happens inside an established TLS session; abuse of the TLS layer itself
(plaintext or a wrong ALPN on the TLS port, stalled and flooded handshakes) is test_tls's.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time

import grpc
import pytest
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

import h2raw
from conftest import channel_for, ping_ok
from ubiq_gen.grpc.testing import messages_pb2
from ubiq_harness import wait_until
from ubiquity.v1 import admin_pb2, admin_pb2_grpc

MiB = 1024 * 1024
# Growth allowed over the warmed-up baseline. Generous on purpose: the failures this
# catches are unbounded (hundreds of MiB), never a few MiB of allocator slack.
MEMORY_GROWTH_BOUND = 128 * MiB

STREAMING_OUTPUT = "/grpc.testing.TestService/StreamingOutputCall"
STREAMING_INPUT = "/grpc.testing.TestService/StreamingInputCall"
PING = "/ubiquity.v1.Admin/Ping"


@pytest.fixture(params=["h2c", "tls"])
def abuse_server(request, start_server, pki):
    """Factory: a started ubiquityd serving h2c or TLS (the test CA's "localhost"
    certificate); `raw(srv)` opens a hostile connection to it the same way."""
    def start():
        if request.param == "h2c":
            srv = start_server()
            srv.client_tls = None
            return srv
        leaf = pki["server"]
        srv = start_server(["--tls-cert", str(leaf.cert), "--tls-key", str(leaf.key)],
                           credentials=grpc.ssl_channel_credentials(root_certificates=pki["ca"].pem))
        srv.client_tls = h2raw.client_tls_context(str(pki["ca"].cert))
        return srv
    return start


def raw(srv, **kwargs) -> h2raw.RawH2:
    """A raw HTTP/2 connection to `srv`, over TLS when it serves TLS."""
    conn = h2raw.RawH2("127.0.0.1", srv.port, tls=srv.client_tls, **kwargs)
    assert srv.client_tls is None or conn.io.selected_alpn == "h2"
    return conn


class Bystander:
    """A well-behaved grpcio client pinging the server on its own connection until
    stopped; every call must succeed."""

    def __init__(self, srv):
        self.channel = channel_for(srv)
        self.stub = admin_pb2_grpc.AdminStub(self.channel)
        self.ok = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        n = 0
        while not self._stop.is_set():
            payload = f"bystander-{n}".encode()
            try:
                resp = self.stub.Ping(admin_pb2.PingRequest(payload=payload), timeout=15)
                if resp.payload != payload:
                    self.errors.append(f"wrong payload {resp.payload!r}")
                else:
                    self.ok += 1
            except grpc.RpcError as e:
                self.errors.append(f"{e.code()}: {e.details()}")
            n += 1
            self._stop.wait(0.05)  # pacing only; nothing is ordered by it

    def __enter__(self):
        self._thread.start()
        # At least one answer before the abuse begins.
        wait_until(lambda: self.ok > 0 or self.errors, 15, message="first bystander ping")
        return self

    def __exit__(self, *exc):
        # At least one more answer while/after the abuse ran.
        target = self.ok + 1
        try:
            wait_until(lambda: self.ok >= target or self.errors, 30,
                       message="the bystander to be served after the abuse")
        finally:
            self._stop.set()
            self._thread.join(timeout=30)
            self.channel.close()
        assert not self.errors, f"well-behaved client failed during abuse: {self.errors[:5]}"


def stats(srv) -> admin_pb2.ServerStats:
    ch = channel_for(srv)
    try:
        return admin_pb2_grpc.AdminStub(ch).GetServerStats(admin_pb2.GetServerStatsRequest(),
                                                          timeout=15)
    finally:
        ch.close()


def warm_up(srv) -> int:
    """Exercises the common paths once so lazy allocations happen before the baseline."""
    ch = channel_for(srv)
    try:
        stub = admin_pb2_grpc.AdminStub(ch)
        for _ in range(50):
            stub.Ping(admin_pb2.PingRequest(payload=b"w" * 1024), timeout=15)
        from ubiq_gen.grpc.testing import test_pb2_grpc
        t = test_pb2_grpc.TestServiceStub(ch)
        req = messages_pb2.StreamingOutputCallRequest(response_parameters=[
            messages_pb2.ResponseParameters(size=64 * 1024) for _ in range(16)])
        assert len(list(t.StreamingOutputCall(req, timeout=30))) == 16
    finally:
        ch.close()
    return srv.rss_bytes()


def assert_healthy(srv, rss_before: int):
    assert srv.alive(), f"ubiquityd died (exit {srv.proc.poll()})\n{srv.stderr_tail()}"
    rss = srv.rss_bytes()
    growth = rss - rss_before
    assert growth <= MEMORY_GROWTH_BOUND, (
        f"resident memory grew by {growth / MiB:.1f} MiB ({rss_before / MiB:.1f} -> "
        f"{rss / MiB:.1f} MiB), bound {MEMORY_GROWTH_BOUND / MiB:.0f} MiB")
    ping_ok(srv.address, credentials=srv.credentials)


def watch_rss(srv, rss_before: int, seconds: float):
    """Samples RSS (at least once) for a bounded time; fails as soon as it passes the
    bound. Returns the peak seen."""
    peak = rss_before
    deadline = time.monotonic() + seconds
    wake = threading.Event()  # never set: Event.wait is only the sampling period
    while True:
        assert srv.alive(), f"ubiquityd died (exit {srv.proc.poll()})\n{srv.stderr_tail()}"
        peak = max(peak, srv.rss_bytes())
        assert peak - rss_before <= MEMORY_GROWTH_BOUND, (
            f"resident memory grew by {(peak - rss_before) / MiB:.1f} MiB while a "
            f"peer misbehaved (bound {MEMORY_GROWTH_BOUND / MiB:.0f} MiB)")
        if time.monotonic() >= deadline:
            return peak
        wake.wait(0.1)


def wait_streams_released(srv, baseline_open_streams: int, timeout: float = 15):
    wait_until(lambda: stats(srv).open_streams <= baseline_open_streams, timeout,
               message=f"open_streams back to {baseline_open_streams}")


# -- garbage instead of the connection preface -------------------------------

GARBAGE = [
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",                      # corrupted preface
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS ClientHello
    h2raw.PREFACE + b"\x00\x00\x08\x00\x00\x00\x00\x00\x00" + b"x" * 8,  # DATA on stream 0
]


def test_abuse_garbage_preface(abuse_server):
    srv = abuse_server()
    rss_before = warm_up(srv)
    errors_before = stats(srv).protocol_errors
    rnd = os.urandom(256 * 1024)
    attempts = 0
    with Bystander(srv):
        for i in range(200):
            garbage = GARBAGE[i % len(GARBAGE)] if i % 5 else rnd[(i * 997) % 4096:][:65536]
            with raw(srv) as conn:
                attempts += 1
                if not conn.send_bytes(garbage):
                    continue
                # The server must close the connection (after an optional GOAWAY).
                received = 0
                while True:
                    try:
                        chunk = conn.io.recv(65536)
                    except socket.timeout:
                        pytest.fail(f"server kept a connection open after garbage {garbage[:40]!r}")
                    except (ConnectionResetError, ssl.SSLError):
                        break  # reset, or a TLS session cut without close_notify
                    if not chunk:
                        break
                    received += len(chunk)
                    assert received < 1 * MiB, "server keeps sending to a garbage peer"
    assert_healthy(srv, rss_before)
    # Every one of those connections was a protocol violation the server closed.
    try:
        wait_until(lambda: stats(srv).protocol_errors - errors_before >= attempts, 10,
                   message=f"protocol_errors to grow by {attempts}")
    except AssertionError:
        grew = stats(srv).protocol_errors - errors_before
        pytest.fail(f"protocol_errors grew by {grew} for {attempts} garbage connections; "
                    f"not counted: {_uncounted_garbage(srv)}", pytrace=False)


def _uncounted_garbage(srv) -> list[bytes]:
    """Which kinds of garbage the protocol_errors counter misses (for the message)."""
    missed = []
    for garbage in GARBAGE + [os.urandom(1024)]:
        before = stats(srv).protocol_errors
        with raw(srv) as conn:
            try:
                conn.io.sendall(garbage)
                while conn.io.recv(65536):
                    pass
            except OSError:
                pass
        try:
            wait_until(lambda: stats(srv).protocol_errors > before, 3, message="count")
        except AssertionError:
            missed.append(garbage[:40])
    return missed


# -- rapid reset (CVE-2023-44487 shape) ---------------------------------------

def test_abuse_rapid_reset(abuse_server):
    srv = abuse_server()
    rss_before = warm_up(srv)
    baseline = stats(srv).open_streams
    # Each stream starts a handler that would run ~60 s, then is reset at once: the
    # handler's work must be cancelled and the stream state freed long before that.
    request = h2raw.grpc_frame(messages_pb2.StreamingOutputCallRequest(response_parameters=[
        messages_pb2.ResponseParameters(size=10, interval_us=10_000_000) for _ in range(6)
    ]).SerializeToString())
    conn = raw(srv)
    sent = 0
    try:
        conn.preface()
        conn.start_reader()
        with Bystander(srv):
            for _batch in range(100):
                out = bytearray()
                for _ in range(100):
                    sid = conn.new_stream_id()
                    out += conn.encode_headers(sid, h2raw.grpc_request_headers(
                        conn.authority, STREAMING_OUTPUT), end_stream=False)
                    df = DataFrame(sid, request)
                    df.flags.add("END_STREAM")
                    out += df.serialize()
                    out += RstStreamFrame(sid, error_code=h2raw.CANCEL).serialize()
                if not conn.send_bytes(bytes(out)):
                    break
                sent += 100
                watch_rss(srv, rss_before, 0)
                if conn.peer_closed or conn.goaway:
                    break  # the server's rapid-reset mitigation ended the connection
            # Whatever the server decided (serve all, or GOAWAY ENHANCE_YOUR_CALM), every
            # reset stream must be released.
            wait_streams_released(srv, baseline, timeout=30)
            peak = watch_rss(srv, rss_before, 1.0)
    finally:
        conn.close()
    assert sent >= 100, "server refused the connection before any reset was sent"
    assert_healthy(srv, rss_before)
    assert peak - rss_before <= MEMORY_GROWTH_BOUND


# -- empty DATA frame flood ---------------------------------------------------

def test_abuse_empty_data_flood(abuse_server):
    srv = abuse_server()
    rss_before = warm_up(srv)
    errors_before = stats(srv).protocol_errors
    conn = raw(srv)
    try:
        conn.preface()
        conn.start_reader()
        sid = conn.new_stream_id()
        conn.headers(sid, h2raw.grpc_request_headers(conn.authority, STREAMING_INPUT))
        batch = DataFrame(sid, b"").serialize() * 1000
        with Bystander(srv):
            for _ in range(500):  # up to 500,000 empty DATA frames
                if not conn.send_bytes(batch) or conn.peer_closed or conn.goaway:
                    break
            # The server must treat this as abuse and drop the connection.
            conn.wait_for(lambda c: c.peer_closed or c.goaway is not None or c.send_failed,
                          15, "the server to drop the empty-DATA flooder")
            watch_rss(srv, rss_before, 0.5)
    finally:
        conn.close()
    assert_healthy(srv, rss_before)
    # One connection, one protocol error and one log line: frames still in the read buffer
    # after the connection was ended do not trip the guard again (it logged 12,000 lines).
    assert stats(srv).protocol_errors == errors_before + 1
    assert srv.stderr_text().count("closing abusive connection") == 1


def test_few_empty_data_frames_are_fine(abuse_server):
    """Legitimate clients send an occasional empty DATA frame (e.g. a bare END_STREAM)."""
    with raw(abuse_server()) as conn:
        conn.preface()
        conn.start_reader()
        sid = conn.new_stream_id()
        conn.headers(sid, h2raw.grpc_request_headers(conn.authority, PING))
        conn.data(sid, b"")
        conn.data(sid, h2raw.grpc_frame(admin_pb2.PingRequest(payload=b"e").SerializeToString()))
        conn.data(sid, b"")
        conn.data(sid, b"", end_stream=True)
        st = conn.wait_stream(sid)
        assert st.grpc_status == 0, st.header_blocks
        [msg] = h2raw.grpc_messages(bytes(st.data))
        assert admin_pb2.PingResponse.FromString(msg).payload == b"e"


# -- a peer that never reads while the server streams -------------------------

@pytest.mark.parametrize("windows", ["default-windows", "huge-windows"])
def test_abuse_client_never_reads(abuse_server, windows):
    srv = abuse_server()
    rss_before = warm_up(srv)
    baseline = stats(srv).open_streams
    # 2,000 responses of 256 KiB: 500 MiB if the server buffered them all.
    request = messages_pb2.StreamingOutputCallRequest(response_parameters=[
        messages_pb2.ResponseParameters(size=256 * 1024) for _ in range(2000)])
    conn = raw(srv, rcvbuf=16 * 1024)
    try:
        if windows == "huge-windows":
            # HTTP/2 flow control out of the way: only the server's own write-queue bound
            # (stop producing when the socket is full) can keep memory bounded.
            conn.preface({0x4: 2**31 - 1}, window_increment=2**31 - 1 - 65535)
        else:
            conn.preface()
        # No reader thread: nothing is ever read from this socket.
        sid = conn.new_stream_id()
        conn.headers(sid, h2raw.grpc_request_headers(conn.authority, STREAMING_OUTPUT))
        conn.data(sid, h2raw.grpc_frame(request.SerializeToString()), end_stream=True)
        with Bystander(srv):
            watch_rss(srv, rss_before, 8.0)
        # The stream is still open (nothing was read); ending the connection frees it.
    finally:
        conn.close()
    wait_streams_released(srv, baseline, timeout=30)
    assert_healthy(srv, rss_before)


# -- oversized headers --------------------------------------------------------

def _oversized_header_blocks(authority):
    """Encoded once with a fresh HPACK encoder (what each new connection's would emit)."""
    import hpack

    base = h2raw.grpc_request_headers(authority, PING)
    variants = {
        "one-64KiB-value": base + [("x-big", "a" * 65536)],
        "4000-headers": base + [(f"x-h{i}", "v" * 8) for i in range(4000)],
        "1MiB-value": base + [("x-huge", "b" * MiB)],
    }
    return {name: hpack.Encoder().encode(headers, huffman=False)
            for name, headers in variants.items()}


def test_abuse_oversized_header_list(abuse_server):
    srv = abuse_server()
    rss_before = warm_up(srv)
    msg = h2raw.grpc_frame(admin_pb2.PingRequest(payload=b"h").SerializeToString())
    with Bystander(srv):
        for name, block in _oversized_header_blocks(f"127.0.0.1:{srv.port}").items():
            for _ in range(20):
                with raw(srv) as conn:
                    conn.preface()
                    conn.start_reader()
                    sid = conn.new_stream_id()
                    conn.streams[sid] = h2raw.StreamState()
                    conn.send_bytes(conn.frame_header_block(sid, block, end_stream=False)
                                    + DataFrame(sid, msg, flags=["END_STREAM"]).serialize())
                    conn.wait_for(lambda c: (c.streams[sid].finished or c.peer_closed
                                             or c.goaway is not None or c.send_failed),
                                  15, f"the server to refuse {name}")
                    st = conn.streams[sid]
                    served = st.grpc_status == 0 and st.headers.get(":status") == "200"
                    assert not served, f"{name}: a header list over the limit was served"
            watch_rss(srv, rss_before, 0)
    assert_healthy(srv, rss_before)


def test_oversized_metadata_from_grpcio_fails_cleanly(abuse_server):
    srv = abuse_server()
    ch = channel_for(srv)
    try:
        admin = admin_pb2_grpc.AdminStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            admin.Ping(admin_pb2.PingRequest(), metadata=[("x-big", "a" * 64 * 1024)], timeout=15)
        assert err.value.code() != grpc.StatusCode.OK
        assert admin.Ping(admin_pb2.PingRequest(payload=b"p"), timeout=15).payload == b"p"
    finally:
        ch.close()
    ping_ok(srv.address, credentials=srv.credentials)


def test_abuse_continuation_flood(abuse_server):
    """HEADERS followed by an endless run of CONTINUATION frames (never END_HEADERS)."""
    srv = abuse_server()
    rss_before = warm_up(srv)
    conn = raw(srv)
    try:
        conn.preface()
        conn.start_reader()
        sid = conn.new_stream_id()
        block = conn.encoder.encode(h2raw.grpc_request_headers(conn.authority, PING))
        conn.send_frame(HeadersFrame(sid, block))  # no END_HEADERS
        # Literal header fields without indexing, repeated: 16 KiB per frame.
        filler = b"\x00\x05x-pad\x7f\x7f" + b"z" * 254
        chunk = (filler * (16384 // len(filler)))[:16384]
        frame = ContinuationFrame(sid, chunk).serialize()
        with Bystander(srv):
            for _ in range(64):  # up to 64 x 64 x 16 KiB = 64 MiB of header block
                if not conn.send_bytes(frame * 64) or conn.peer_closed or conn.goaway:
                    break
                watch_rss(srv, rss_before, 0)
            conn.wait_for(lambda c: c.peer_closed or c.goaway is not None or c.send_failed
                          or c.send_blocked, 15,
                          "the server to drop (or stop reading) the CONTINUATION flooder")
            watch_rss(srv, rss_before, 0.5)
    finally:
        conn.close()
    assert_healthy(srv, rss_before)


# -- PING flood ---------------------------------------------------------------

def test_abuse_ping_flood(abuse_server):
    srv = abuse_server()
    rss_before = warm_up(srv)
    conn = raw(srv, rcvbuf=16 * 1024)
    try:
        conn.preface()
        conn.sock.settimeout(2.0)
        # No reader: ACKs pile up on the server's side unless it bounds them.
        batch = b"".join(PingFrame(0, opaque_data=i.to_bytes(8, "big")).serialize()
                         for i in range(1000))
        with Bystander(srv):
            for _ in range(200):  # up to 200,000 PINGs
                if not conn.send_bytes(batch):
                    break
                watch_rss(srv, rss_before, 0)
            watch_rss(srv, rss_before, 1.0)
        # Any of these is fine: the server closed the connection, stopped reading it,
        # or kept up. What matters is bounded memory and everyone else being served.
    finally:
        conn.close()
    assert_healthy(srv, rss_before)


# -- SETTINGS flood -----------------------------------------------------------

def test_abuse_settings_flood(abuse_server):
    srv = abuse_server()
    rss_before = warm_up(srv)
    conn = raw(srv)
    try:
        conn.preface()
        conn.start_reader()
        one = SettingsFrame(0, settings={0x4: 65535, 0x2: 0}).serialize()
        with Bystander(srv):
            for _ in range(100):  # up to 100,000 SETTINGS frames, each needing an ACK
                if not conn.send_bytes(one * 1000) or conn.peer_closed or conn.goaway:
                    break
                watch_rss(srv, rss_before, 0)
            conn.wait_for(lambda c: c.peer_closed or c.goaway is not None or c.send_failed
                          or c.send_blocked, 15, "the server to drop the SETTINGS flooder")
            watch_rss(srv, rss_before, 0.5)
    finally:
        conn.close()
    assert_healthy(srv, rss_before)


# -- mutated conversations (deterministic fuzzing) ----------------------------

_FUZZ_PATHS = [
    PING, STREAMING_OUTPUT, STREAMING_INPUT,
    "/grpc.testing.TestService/FullDuplexCall", "/grpc.testing.TestService/UnaryCall",
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "/no.Such/Method",
]


def _fuzz_messages():
    return [
        admin_pb2.PingRequest(payload=b"abc").SerializeToString(),
        messages_pb2.StreamingOutputCallRequest(response_parameters=[
            messages_pb2.ResponseParameters(size=100, interval_us=1000)] * 3).SerializeToString(),
        messages_pb2.SimpleRequest(response_size=50, response_status=messages_pb2.EchoStatus(
            code=3, message="x")).SerializeToString(),
        b"",
        b"\x0a\x05hello",
    ]


def _conversation(rng, encoder, authority, messages) -> list[bytes]:
    """A valid client conversation: a few calls of every shape, ended, reset or left open."""
    frames = []
    sid = 1
    for _ in range(rng.randrange(1, 6)):
        extra = rng.choice([[], [("grpc-timeout", "100m")], [("x-a-bin", "AAEC")],
                            [("grpc-encoding", "gzip")]])
        headers = h2raw.grpc_request_headers(authority, rng.choice(_FUZZ_PATHS), extra=extra)
        frames.append(h2raw.RawH2.frame_header_block(sid, encoder.encode(headers), False))
        for _ in range(rng.randrange(0, 4)):
            frames.append(DataFrame(sid, h2raw.grpc_frame(rng.choice(messages))).serialize())
        r = rng.random()
        if r < 0.6:
            frames.append(DataFrame(sid, b"", flags=["END_STREAM"]).serialize())
        elif r < 0.8:
            frames.append(RstStreamFrame(sid, error_code=h2raw.CANCEL).serialize())
        frames.append(rng.choice([
            PingFrame(0, opaque_data=b"12345678").serialize(),
            WindowUpdateFrame(0, window_increment=1000).serialize(),
            WindowUpdateFrame(sid, window_increment=5).serialize(),
        ]))
        sid += 2
    return frames


def _mutate(rng, frames: list[bytes]) -> list[bytes]:
    """1-3 mutations: bit flip, flags, stream id, duplicate, truncate, swap, length, type."""
    import struct

    frames = list(frames)
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(frames))
        f = bytearray(frames[i])
        m = rng.randrange(8)
        if len(f) < 9 and m in (1, 2, 6, 7):
            m = 3
        if m == 0 and len(f) > 9:
            f[9 + rng.randrange(len(f) - 9)] ^= 1 << rng.randrange(8)
        elif m == 1:
            f[4] = rng.randrange(256)
        elif m == 2:
            f[5:9] = struct.pack(">I", rng.choice([0, 2, 1, 3, 7, 2**31 - 1]))
        elif m == 3:
            frames.insert(i, bytes(f))
        elif m == 4:
            f = f[:rng.randrange(len(f) + 1)]
        elif m == 5 and len(frames) > 1:
            j = rng.randrange(len(frames))
            frames[i], frames[j] = frames[j], frames[i]
        elif m == 6:
            f[0:3] = struct.pack(">I", rng.randrange(1 << 15))[1:]
        elif m == 7:
            f[3] = rng.choice([0, 1, 2, 3, 4, 5, 8, 9, 10, 0x10])
        frames[i] = bytes(f)
    return frames


@pytest.mark.parametrize("seed", [1, 2])
def test_abuse_mutated_conversations(abuse_server, seed):
    """150 valid conversations per seed, each with 1-3 random mutations. Reproducible:
    the seed and the conversation index are in every failure message."""
    import random

    import hpack

    srv = abuse_server()
    rss_before = warm_up(srv)
    rng = random.Random(seed)
    messages = _fuzz_messages()
    with Bystander(srv):
        for k in range(150):
            conn = raw(srv)
            try:
                conn.preface()
                conn.start_reader()
                frames = _mutate(rng, _conversation(rng, hpack.Encoder(), conn.authority, messages))
                conn.send_bytes(b"".join(frames))
                try:
                    conn.wait_for(lambda c: c.peer_closed or c.goaway is not None or (
                        c.streams and all(s.finished for s in c.streams.values())), 1.5, "answers")
                except AssertionError:
                    pass  # calls left open by the mutation; closing the connection ends them
            finally:
                conn.close()
            assert srv.alive(), (f"ubiquityd died on seed {seed}, conversation {k}\n"
                                 f"{srv.stderr_tail()}")
    watch_rss(srv, rss_before, 0)
    assert_healthy(srv, rss_before)


# -- a peer that ignores flow control -----------------------------------------

def test_abuse_client_ignores_flow_control(abuse_server):
    """DATA keeps coming far past the windows the server granted: the server must not
    buffer it — it ends the stream or the connection with FLOW_CONTROL_ERROR."""
    srv = abuse_server()
    rss_before = warm_up(srv)
    conn = raw(srv)
    try:
        conn.preface()
        conn.start_reader()
        sid = conn.new_stream_id()
        conn.headers(sid, h2raw.grpc_request_headers(conn.authority,
                                                     "/grpc.testing.TestService/FullDuplexCall"))
        # Each request asks for a 256 KiB response and carries 60 KB, sent without
        # waiting for WINDOW_UPDATE.
        msg = h2raw.grpc_frame(messages_pb2.StreamingOutputCallRequest(
            response_parameters=[messages_pb2.ResponseParameters(size=256 * 1024)],
            payload=messages_pb2.Payload(body=b"p" * 60000)).SerializeToString())
        flow_control_error = 0x3
        with Bystander(srv):
            for _ in range(1000):  # up to ~60 MB, far past any window
                if not conn.data(sid, msg):
                    break
                st = conn.streams[sid]
                if st.reset is not None or conn.goaway is not None or conn.peer_closed:
                    break
            conn.wait_for(lambda c: c.streams[sid].reset is not None or c.goaway is not None
                          or c.peer_closed, 15, "the server to stop the flow-control violator")
            watch_rss(srv, rss_before, 0.5)
        st = conn.streams[sid]
        if conn.goaway is not None:
            assert conn.goaway.error_code == flow_control_error, conn.goaway
        else:
            assert st.reset == flow_control_error, st.reset
    finally:
        conn.close()
    assert_healthy(srv, rss_before)
