"""ubiquity.v1.Admin and the gRPC call semantics of the transport (SPEC §3 transport
paragraph, §5 limits), with grpcio and, where grpcio cannot produce the input, a raw
HTTP/2 connection.
"""

from __future__ import annotations

import time

import grpc
import pytest

import h2raw
from conftest import get_stats, make_channel, ping_ok
from ubiq_gen.grpc.testing import messages_pb2, test_pb2_grpc
from ubiq_harness import wait_until
from ubiquity.v1 import admin_pb2, admin_pb2_grpc

MiB = 1024 * 1024
DEFAULT_MAX_RECEIVE = 4 * MiB
CALL_TIMEOUT = 20

# Codes as numbers, for stats maps and raw trailers.
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED = 0, 1, 2, 3, 4
RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL = 8, 12, 13

PING = "/ubiquity.v1.Admin/Ping"


@pytest.fixture(scope="module")
def testsvc(channel):
    return test_pb2_grpc.TestServiceStub(channel)


@pytest.fixture
def raw(server):
    conn = h2raw.RawH2("127.0.0.1", server.port)
    conn.preface()
    conn.start_reader()
    yield conn
    conn.close()


# -- Admin -------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 1000, 1 * MiB])
def test_admin_ping_round_trip(admin, size):
    data = bytes(i % 251 for i in range(size))
    before = time.time()
    resp = admin.Ping(admin_pb2.PingRequest(payload=data), timeout=CALL_TIMEOUT)
    after = time.time()
    assert resp.payload == data
    # The server's clock is this machine's clock; allow for coarse clocks, not speed.
    assert (before - 60) * 1e6 <= resp.server_time_micros <= (after + 60) * 1e6


def test_admin_server_info(server, admin):
    info = admin.GetServerInfo(admin_pb2.GetServerInfoRequest(), timeout=CALL_TIMEOUT)
    assert info.name == "ubiquityd"
    assert info.version
    assert info.listen_address.endswith(f":{server.port}")
    for svc in ("ubiquity.v1.Admin", "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection", "grpc.testing.TestService"):
        assert svc in info.services
    # Documented defaults (SPEC §5, issue 2).
    assert info.limits.max_receive_message_bytes == DEFAULT_MAX_RECEIVE
    assert info.limits.max_concurrent_streams == 100
    assert info.limits.max_header_list_bytes == 16384
    assert info.event_loops >= 1


def test_admin_server_stats_count_calls(channel, admin):
    before = admin.GetServerStats(admin_pb2.GetServerStatsRequest(), timeout=CALL_TIMEOUT)
    for _ in range(5):
        admin.Ping(admin_pb2.PingRequest(), timeout=CALL_TIMEOUT)
    with pytest.raises(grpc.RpcError):
        channel.unary_unary("/ubiquity.v1.Admin/NoSuchMethod")(b"", timeout=CALL_TIMEOUT)
    after = admin.GetServerStats(admin_pb2.GetServerStatsRequest(), timeout=CALL_TIMEOUT)
    # 5 pings (and the first GetServerStats itself) completed OK in between.
    assert after.calls_by_status[OK] - before.calls_by_status[OK] >= 5
    assert after.calls_by_status[UNIMPLEMENTED] - before.calls_by_status[UNIMPLEMENTED] >= 1
    assert after.open_connections >= 1
    assert after.accepted_connections >= after.open_connections
    assert after.resident_bytes > 0


def test_admin_stats_resident_bytes_matches_proc(server, admin):
    stats = admin.GetServerStats(admin_pb2.GetServerStatsRequest(), timeout=CALL_TIMEOUT)
    rss = server.rss_bytes()
    # Same process, same quantity, read at slightly different moments.
    assert rss / 4 <= stats.resident_bytes <= rss * 4


# -- metadata, deadlines, cancellation ---------------------------------------

def test_metadata_round_trip(testsvc):
    binary = bytes(range(256)) * 16  # every byte value, 4 KiB
    text = "value with spaces and punctuation: ~!@#$%^&*()_+-=[]{}|;':,./<>?"
    md = [("x-grpc-test-echo-initial", text),
          ("x-grpc-test-echo-trailing-bin", binary),
          ("x-unrelated-header", "ignored-but-accepted")]
    resp, call = testsvc.UnaryCall.with_call(
        messages_pb2.SimpleRequest(response_size=10), metadata=md, timeout=CALL_TIMEOUT)
    assert len(resp.payload.body) == 10
    initial = dict(call.initial_metadata())
    trailing = dict(call.trailing_metadata())
    assert initial["x-grpc-test-echo-initial"] == text
    assert trailing["x-grpc-test-echo-trailing-bin"] == binary
    # Echoed keys are not mixed up between header and trailer blocks.
    assert "x-grpc-test-echo-trailing-bin" not in initial
    assert "x-grpc-test-echo-initial" not in trailing


def test_metadata_near_header_limit_is_accepted(testsvc):
    value = "v" * 8000  # well under the 16 KiB header-list default
    _, call = testsvc.UnaryCall.with_call(
        messages_pb2.SimpleRequest(), metadata=[("x-grpc-test-echo-initial", value)],
        timeout=CALL_TIMEOUT)
    assert dict(call.initial_metadata())["x-grpc-test-echo-initial"] == value


def slow_stream_request(count: int, interval_s: float, size: int = 8):
    return messages_pb2.StreamingOutputCallRequest(response_parameters=[
        messages_pb2.ResponseParameters(size=size, interval_us=int(interval_s * 1e6))
        for _ in range(count)])


def test_deadline_exceeded(testsvc, channel):
    baseline = get_stats(channel).open_streams
    call = testsvc.StreamingOutputCall(slow_stream_request(1, 30.0), timeout=0.5)
    with pytest.raises(grpc.RpcError) as err:
        list(call)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The stream is released long before the 30 s the handler would have slept.
    wait_until(lambda: get_stats(channel).open_streams <= baseline, 10,
               message="the server to release the timed-out stream")


def test_deadline_enforced_by_server(raw):
    """grpc-timeout alone (the client never cancels) must end the call: the server
    answers DEADLINE_EXCEEDED (or resets the stream) instead of running for 30 s."""
    req = slow_stream_request(1, 30.0).SerializeToString()
    sid = raw.unary("/grpc.testing.TestService/StreamingOutputCall", req, timeout="300m")
    st = raw.wait_stream(sid, timeout=15)
    assert st.finished, "server closed the connection instead of ending the stream"
    if st.reset is None:
        assert st.grpc_status == DEADLINE_EXCEEDED, st.header_blocks
    assert h2raw.grpc_messages(bytes(st.data)) == []


def test_client_cancel_mid_stream(server, testsvc, channel):
    baseline = get_stats(channel).open_streams
    call = testsvc.StreamingOutputCall(slow_stream_request(300, 0.1), timeout=120)
    assert len(next(call).payload.body) == 8
    assert len(next(call).payload.body) == 8
    call.cancel()
    with pytest.raises(grpc.RpcError) as err:
        for _ in call:
            pass
    assert err.value.code() == grpc.StatusCode.CANCELLED
    # ~30 s of responses were left; the cancelled call must be gone well before.
    wait_until(lambda: get_stats(channel).open_streams <= baseline, 15,
               message="the server to drop the cancelled call")
    ping_ok(server.address)


# -- limits and bad input ----------------------------------------------------

def simple_request_of_size(total: int) -> messages_pb2.SimpleRequest:
    """A SimpleRequest whose serialized size is exactly `total` bytes."""
    body = max(0, total - 10)
    for _ in range(10):  # converges in a step or two; bounded in case it cannot
        req = messages_pb2.SimpleRequest(payload=messages_pb2.Payload(body=b"x" * body))
        size = req.ByteSize()
        if size == total:
            return req
        body += total - size
        assert body >= 0
    raise ValueError(f"no SimpleRequest serializes to exactly {total} bytes")


def test_message_at_limit_is_accepted(testsvc):
    req = simple_request_of_size(DEFAULT_MAX_RECEIVE)
    req.response_size = 1
    # response_size adds 2 bytes; trim the body to stay exactly at the limit.
    req.payload.body = req.payload.body[:-2]
    assert req.ByteSize() == DEFAULT_MAX_RECEIVE
    resp = testsvc.UnaryCall(req, timeout=CALL_TIMEOUT)
    assert len(resp.payload.body) == 1


def test_message_over_limit_resource_exhausted(server, testsvc, admin):
    req = simple_request_of_size(DEFAULT_MAX_RECEIVE + 1)
    with pytest.raises(grpc.RpcError) as err:
        testsvc.UnaryCall(req, timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Same connection and a new one keep being served.
    assert admin.Ping(admin_pb2.PingRequest(payload=b"after"), timeout=CALL_TIMEOUT).payload == b"after"
    ping_ok(server.address)


def test_message_over_limit_client_streaming(testsvc, admin):
    big = messages_pb2.StreamingInputCallRequest(
        payload=messages_pb2.Payload(body=b"y" * (DEFAULT_MAX_RECEIVE + 10)))
    small = messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=b"z"))
    with pytest.raises(grpc.RpcError) as err:
        testsvc.StreamingInputCall(iter([small, big, small]), timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert admin.Ping(admin_pb2.PingRequest(), timeout=CALL_TIMEOUT) is not None


def test_max_receive_message_flag(start_server):
    srv = start_server(["--max-receive-message-bytes", "1024"])
    ch = make_channel(srv.address)
    try:
        stub = test_pb2_grpc.TestServiceStub(ch)
        assert stub.UnaryCall(simple_request_of_size(1024), timeout=CALL_TIMEOUT) is not None
        with pytest.raises(grpc.RpcError) as err:
            stub.UnaryCall(simple_request_of_size(1025), timeout=CALL_TIMEOUT)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = admin_pb2_grpc.AdminStub(ch).GetServerInfo(admin_pb2.GetServerInfoRequest(),
                                                         timeout=CALL_TIMEOUT)
        assert info.limits.max_receive_message_bytes == 1024
    finally:
        ch.close()


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff",                 # field 31, wire type 7: no such wire type
    b"\x0a\xff\xff\xff\xff\x0f",         # length-delimited field longer than the message
    b"\x0a",                             # truncated
], ids=["bad-wire-type", "overlong-length", "truncated"])
@pytest.mark.parametrize("method", [PING, "/grpc.testing.TestService/UnaryCall"])
def test_undecodable_request_invalid_argument(channel, admin, method, garbage):
    call = channel.unary_unary(method)  # no serializers: raw bytes go on the wire
    with pytest.raises(grpc.RpcError) as err:
        call(garbage, timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert admin.Ping(admin_pb2.PingRequest(payload=b"ok"), timeout=CALL_TIMEOUT).payload == b"ok"


def test_unknown_method_and_service_unimplemented(channel):
    for path in ("/ubiquity.v1.Admin/NoSuchMethod", "/ubiquity.v1.NoSuchService/Ping",
                 "/nopackage/x", "/"):
        with pytest.raises(grpc.RpcError) as err:
            channel.unary_unary(path)(b"", timeout=CALL_TIMEOUT)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED, path


def test_unknown_method_is_trailers_only(raw):
    sid = raw.unary("/ubiquity.v1.Admin/NoSuchMethod", b"")
    st = raw.wait_stream(sid)
    assert st.reset in (None, h2raw.NO_ERROR)
    assert len(st.header_blocks) == 1, f"expected one Trailers-Only block: {st.header_blocks}"
    block = dict(st.header_blocks[0])
    assert block[":status"] == "200"
    assert block["content-type"].startswith("application/grpc")
    assert block["grpc-status"] == str(UNIMPLEMENTED)
    assert st.ended and not st.data


def test_rst_stream_no_error_after_early_trailers(raw):
    """Trailers sent before the client half-closed are followed by RST_STREAM(NO_ERROR)."""
    sid = raw.new_stream_id()
    raw.headers(sid, h2raw.grpc_request_headers(raw.authority, "/ubiquity.v1.Admin/NoSuchMethod"))
    raw.wait_for(lambda c: c.streams[sid].ended and c.streams[sid].reset is not None
                 or c.peer_closed, 10, "trailers then RST_STREAM")
    st = raw.streams[sid]
    assert st.grpc_status == UNIMPLEMENTED
    assert st.reset == h2raw.NO_ERROR


def test_unsupported_grpc_encoding_unimplemented(raw):
    msg = admin_pb2.PingRequest(payload=b"zz").SerializeToString()
    sid = raw.new_stream_id()
    raw.headers(sid, h2raw.grpc_request_headers(raw.authority, PING,
                                                [("grpc-encoding", "x-ubiquity-bogus")]))
    raw.data(sid, h2raw.grpc_frame(msg, compressed=True), end_stream=True)
    st = raw.wait_stream(sid)
    assert st.grpc_status == UNIMPLEMENTED, st.header_blocks
    names = {k for block in st.header_blocks for k, _ in block}
    assert "grpc-accept-encoding" in names, st.header_blocks


def test_grpcio_gzip_is_served_or_refused_cleanly(server):
    """grpcio compressing with gzip: either supported (correct echo) or UNIMPLEMENTED."""
    ch = make_channel(server.address)
    try:
        stub = admin_pb2_grpc.AdminStub(ch)
        payload = b"compress me " * 1000
        try:
            resp = stub.Ping(admin_pb2.PingRequest(payload=payload), timeout=CALL_TIMEOUT,
                             compression=grpc.Compression.Gzip)
            assert resp.payload == payload
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNIMPLEMENTED, (e.code(), e.details())
        # Uncompressed calls on the same channel are unaffected.
        assert stub.Ping(admin_pb2.PingRequest(payload=b"p"), timeout=CALL_TIMEOUT).payload == b"p"
    finally:
        ch.close()


@pytest.mark.parametrize("content_type", ["text/plain", "application/json", "application/grpcx"])
def test_non_grpc_content_type_is_415(raw, content_type):
    msg = admin_pb2.PingRequest().SerializeToString()
    sid = raw.unary(PING, msg, content_type=content_type)
    st = raw.wait_stream(sid)
    assert st.header_blocks, f"no response headers (reset={st.reset})"
    assert st.headers.get(":status") == "415", st.header_blocks


def test_missing_content_type_is_415(raw):
    sid = raw.new_stream_id()
    headers = [h for h in h2raw.grpc_request_headers(raw.authority, PING) if h[0] != "content-type"]
    raw.headers(sid, headers)
    raw.data(sid, h2raw.grpc_frame(b""), end_stream=True)
    st = raw.wait_stream(sid)
    assert st.headers.get(":status") == "415", st.header_blocks


def test_grpc_proto_content_type_is_accepted(raw):
    msg = admin_pb2.PingRequest(payload=b"plus-proto").SerializeToString()
    sid = raw.unary(PING, msg, content_type="application/grpc+proto")
    st = raw.wait_stream(sid)
    assert st.headers.get(":status") == "200"
    assert st.grpc_status == OK, st.header_blocks
    [reply] = h2raw.grpc_messages(bytes(st.data))
    assert admin_pb2.PingResponse.FromString(reply).payload == b"plus-proto"


def test_unary_with_zero_messages_rejected(raw):
    sid = raw.new_stream_id()
    raw.headers(sid, h2raw.grpc_request_headers(raw.authority, PING), end_stream=True)
    st = raw.wait_stream(sid)
    assert st.reset is not None or (st.grpc_status not in (None, OK)), st.header_blocks
    assert h2raw.grpc_messages(bytes(st.data)) == []


def test_unary_with_two_messages_rejected(raw):
    msg = admin_pb2.PingRequest(payload=b"a").SerializeToString()
    sid = raw.new_stream_id()
    raw.headers(sid, h2raw.grpc_request_headers(raw.authority, PING))
    raw.data(sid, h2raw.grpc_frame(msg) + h2raw.grpc_frame(msg), end_stream=True)
    st = raw.wait_stream(sid)
    assert st.reset is not None or (st.grpc_status not in (None, OK)), st.header_blocks


def test_truncated_grpc_frame_rejected(raw, admin):
    sid = raw.new_stream_id()
    raw.headers(sid, h2raw.grpc_request_headers(raw.authority, PING))
    # Prefix announces 100 bytes; the stream ends after 3.
    raw.data(sid, b"\x00\x00\x00\x00\x64abc", end_stream=True)
    st = raw.wait_stream(sid)
    assert st.reset is not None or (st.grpc_status not in (None, OK)), st.header_blocks
    assert admin.Ping(admin_pb2.PingRequest(), timeout=CALL_TIMEOUT) is not None


def test_settings_advertise_limits(server):
    with h2raw.RawH2("127.0.0.1", server.port) as conn:
        conn.preface()
        conn.start_reader()
        settings = conn.wait_for(lambda c: c.server_settings or None, 10, "server SETTINGS")
        assert settings.get(0x3) == 100      # SETTINGS_MAX_CONCURRENT_STREAMS
        assert settings.get(0x6) == 16384    # SETTINGS_MAX_HEADER_LIST_SIZE


def test_limit_flags_are_applied(start_server):
    srv = start_server(["--max-concurrent-streams", "7", "--max-header-list-bytes", "9000"])
    with h2raw.RawH2("127.0.0.1", srv.port) as conn:
        conn.preface()
        conn.start_reader()
        settings = conn.wait_for(lambda c: c.server_settings or None, 10, "server SETTINGS")
        assert settings.get(0x3) == 7
        assert settings.get(0x6) == 9000
    ch = make_channel(srv.address)
    try:
        info = admin_pb2_grpc.AdminStub(ch).GetServerInfo(admin_pb2.GetServerInfoRequest(),
                                                         timeout=CALL_TIMEOUT)
        assert info.limits.max_concurrent_streams == 7
        assert info.limits.max_header_list_bytes == 9000
    finally:
        ch.close()


def test_max_connections(start_server):
    srv = start_server(["--max-connections", "3"])
    ch = make_channel(srv.address)  # connection 1
    admin = admin_pb2_grpc.AdminStub(ch)
    conns = []
    try:
        for _ in range(2):  # connections 2 and 3
            c = h2raw.RawH2("127.0.0.1", srv.port)
            c.preface()
            c.start_reader()
            c.wait_for(lambda c: c.server_settings or None, 10, "server SETTINGS")
            conns.append(c)
        assert not any(c.peer_closed for c in conns)
        extra = h2raw.RawH2("127.0.0.1", srv.port)  # connection 4: over the limit
        extra.preface()
        extra.start_reader()
        extra.wait_closed(10)
        extra.close()
        stats = admin.GetServerStats(admin_pb2.GetServerStatsRequest(), timeout=CALL_TIMEOUT)
        assert stats.refused_connections >= 1
        # Freeing a slot lets a new client in.
        conns.pop().close()
        wait_until(lambda: admin.GetServerStats(admin_pb2.GetServerStatsRequest(),
                                                timeout=CALL_TIMEOUT).open_connections <= 2,
                   10, message="the server to notice the closed connection")
        ping_ok(srv.address)
    finally:
        for c in conns:
            c.close()
        ch.close()


# -- flow control, concurrency, stream limits ---------------------------------

def test_large_server_stream_flow_control(testsvc):
    """48 MiB streamed to a reading client: many window updates, nothing lost."""
    sizes = [MiB + i for i in range(48)]
    req = messages_pb2.StreamingOutputCallRequest(
        response_parameters=[messages_pb2.ResponseParameters(size=n) for n in sizes])
    call = testsvc.StreamingOutputCall(req, timeout=120)
    assert [len(r.payload.body) for r in call] == sizes


def test_large_client_stream_flow_control(testsvc):
    """32 MiB uploaded in 1 MiB messages: the server must keep granting window."""
    reqs = (messages_pb2.StreamingInputCallRequest(
        payload=messages_pb2.Payload(body=b"u" * MiB)) for _ in range(32))
    resp = testsvc.StreamingInputCall(reqs, timeout=120)
    assert resp.aggregated_payload_size == 32 * MiB


def test_many_concurrent_calls(server, testsvc):
    """Unary and bidirectional calls interleaved on one connection and several."""
    import concurrent.futures as cf

    def duplex(i):
        reqs = [messages_pb2.StreamingOutputCallRequest(
            response_parameters=[messages_pb2.ResponseParameters(size=i + j)]) for j in range(5)]
        return [len(r.payload.body) for r in testsvc.FullDuplexCall(iter(reqs), timeout=60)]

    unary = [testsvc.UnaryCall.future(messages_pb2.SimpleRequest(response_size=i), timeout=60)
             for i in range(300)]
    with cf.ThreadPoolExecutor(max_workers=16) as pool:
        duplexes = [pool.submit(duplex, i) for i in range(40)]
        others = [pool.submit(ping_ok, server.address, f"c{i}".encode()) for i in range(8)]
        for i, f in enumerate(duplexes):
            assert f.result(timeout=60) == [i + j for j in range(5)]
        for f in others:
            f.result(timeout=60)
    for i, f in enumerate(unary):
        assert len(f.result(timeout=60).payload.body) == i


def test_max_concurrent_streams_enforced(start_server):
    """A peer opening more streams than advertised is stopped: the extra stream is
    refused (RST_STREAM REFUSED_STREAM/PROTOCOL_ERROR), or, as nghttp2 does once the
    client has acknowledged the setting, the connection ends with GOAWAY that excludes
    the extra stream. The server itself carries on."""
    srv = start_server(["--max-concurrent-streams", "3"])
    with h2raw.RawH2("127.0.0.1", srv.port) as conn:
        conn.preface()
        conn.start_reader()
        conn.wait_for(lambda c: c.server_settings.get(0x3) == 3 or None, 10, "SETTINGS")
        path = "/grpc.testing.TestService/StreamingInputCall"
        # Three client-streaming calls stay open until the client half-closes them.
        open_ids = []
        for _ in range(3):
            sid = conn.new_stream_id()
            conn.headers(sid, h2raw.grpc_request_headers(conn.authority, path))
            open_ids.append(sid)
        extra = conn.new_stream_id()
        conn.headers(extra, h2raw.grpc_request_headers(conn.authority, path))
        conn.wait_for(lambda c: c.streams[extra].reset is not None or c.goaway is not None,
                      10, "the stream over the limit to be refused")
        if conn.goaway is not None:
            assert conn.goaway.last_stream_id < extra, conn.goaway
            assert not conn.streams[extra].header_blocks, "the extra stream was served"
        else:
            assert conn.streams[extra].reset in (0x7, h2raw.PROTOCOL_ERROR)
            # The three admitted calls still work.
            msg = messages_pb2.StreamingInputCallRequest(
                payload=messages_pb2.Payload(body=b"12345")).SerializeToString()
            for sid in open_ids:
                conn.data(sid, h2raw.grpc_frame(msg), end_stream=True)
            for sid in open_ids:
                st = conn.wait_stream(sid)
                assert st.grpc_status == OK, st.header_blocks
                [reply] = h2raw.grpc_messages(bytes(st.data))
                assert messages_pb2.StreamingInputCallResponse.FromString(
                    reply).aggregated_payload_size == 5
            # With the slots free again, a new stream is admitted.
            sid = conn.unary(PING, admin_pb2.PingRequest(payload=b"again").SerializeToString())
            st = conn.wait_stream(sid)
            assert st.grpc_status == OK, st.header_blocks
    ping_ok(srv.address)


def test_grpcio_respects_max_concurrent_streams(start_server):
    """A well-behaved client with more calls than the limit queues them; all succeed."""
    import concurrent.futures as cf

    srv = start_server(["--max-concurrent-streams", "2"])
    ch = make_channel(srv.address)
    try:
        stub = test_pb2_grpc.TestServiceStub(ch)
        req = slow_stream_request(3, 0.05, size=7)
        with cf.ThreadPoolExecutor(max_workers=10) as pool:
            futures = [pool.submit(lambda: [len(r.payload.body) for r in
                                            stub.StreamingOutputCall(req, timeout=60)])
                       for _ in range(10)]
            for f in futures:
                assert f.result(timeout=90) == [7, 7, 7]
    finally:
        ch.close()


def test_grpc_message_is_percent_encoded_on_the_wire(raw):
    from urllib.parse import unquote

    message = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n 100%"
    req = messages_pb2.SimpleRequest(response_status=messages_pb2.EchoStatus(
        code=UNKNOWN, message=message))
    sid = raw.unary("/grpc.testing.TestService/UnaryCall", req.SerializeToString())
    st = raw.wait_stream(sid)
    assert st.grpc_status == UNKNOWN, st.header_blocks
    wire = st.trailers["grpc-message"]
    assert all(0x20 <= ord(ch) <= 0x7E for ch in wire), f"not percent-encoded: {wire!r}"
    assert unquote(wire, errors="strict") == message


# -- more request validation (docs/protocol.md "Requests") --------------------

def test_non_post_method_rejected(raw):
    sid = raw.new_stream_id()
    headers = [(":method", "GET") if k == ":method" else (k, v)
               for k, v in h2raw.grpc_request_headers(raw.authority, PING)]
    raw.headers(sid, headers, end_stream=True)
    st = raw.wait_stream(sid)
    assert st.headers.get(":status") == "405", st.header_blocks
    assert st.grpc_status not in (None, OK), st.header_blocks


def test_415_carries_a_non_ok_grpc_status(raw):
    sid = raw.unary(PING, admin_pb2.PingRequest().SerializeToString(), content_type="text/html")
    st = raw.wait_stream(sid)
    assert st.headers.get(":status") == "415"
    assert st.grpc_status not in (None, OK), st.header_blocks


def test_compressed_flag_without_encoding_rejected(raw):
    msg = admin_pb2.PingRequest(payload=b"c").SerializeToString()
    sid = raw.new_stream_id()
    raw.headers(sid, h2raw.grpc_request_headers(raw.authority, PING))
    raw.data(sid, h2raw.grpc_frame(msg, compressed=True), end_stream=True)
    st = raw.wait_stream(sid)
    assert st.grpc_status not in (None, OK), st.header_blocks


@pytest.mark.parametrize("method", [PING, "/grpc.testing.TestService/StreamingOutputCall"])
def test_single_request_call_with_zero_messages_rejected(raw, method):
    sid = raw.new_stream_id()
    raw.headers(sid, h2raw.grpc_request_headers(raw.authority, method), end_stream=True)
    st = raw.wait_stream(sid)
    assert st.reset is not None or st.grpc_status not in (None, OK), st.header_blocks
    assert h2raw.grpc_messages(bytes(st.data)) == []


@pytest.mark.parametrize("value", ["abc", "", "123456789S", "10x", "-5S"])
def test_malformed_grpc_timeout_invalid_argument(raw, value):
    sid = raw.unary(PING, admin_pb2.PingRequest().SerializeToString(), timeout=value)
    st = raw.wait_stream(sid)
    assert st.grpc_status == INVALID_ARGUMENT, (value, st.header_blocks)


@pytest.mark.parametrize("value,ok", [("1S", True), ("99999999n", False), ("1H", True),
                                      ("500m", True), ("1000000u", True)])
def test_grpc_timeout_units(raw, value, ok):
    """Every unit parses; a 99 ms deadline on a call that sleeps 1 s expires."""
    req = slow_stream_request(1, 0.0 if ok else 1.0).SerializeToString()
    sid = raw.unary("/grpc.testing.TestService/StreamingOutputCall", req, timeout=value)
    st = raw.wait_stream(sid, timeout=15)
    assert st.grpc_status == (OK if ok else DEADLINE_EXCEEDED), (value, st.header_blocks)


def test_bin_metadata_padded_and_unpadded_base64(raw):
    import base64

    value = b"\x00\x01\xfe\xff\x10"  # 5 bytes: base64 needs one '=' of padding
    padded = base64.b64encode(value).decode()
    assert padded.endswith("=")
    for encoded in (padded, padded.rstrip("=")):
        sid = raw.unary("/grpc.testing.TestService/UnaryCall",
                        messages_pb2.SimpleRequest().SerializeToString(),
                        extra=[("x-grpc-test-echo-trailing-bin", encoded)])
        st = raw.wait_stream(sid)
        assert st.grpc_status == OK, st.header_blocks
        echoed = st.trailers["x-grpc-test-echo-trailing-bin"]
        assert base64.b64decode(echoed + "=" * (-len(echoed) % 4)) == value, echoed


def test_bin_metadata_not_base64_invalid_argument(raw):
    sid = raw.unary("/grpc.testing.TestService/UnaryCall",
                    messages_pb2.SimpleRequest().SerializeToString(),
                    extra=[("x-grpc-test-echo-trailing-bin", "!!not base64!!")])
    st = raw.wait_stream(sid)
    assert st.grpc_status == INVALID_ARGUMENT, st.header_blocks


def test_header_list_over_limit_is_431_and_connection_survives(raw):
    big = [("x-big", "h" * (20 * 1024))]  # over 16 KiB, well under "far larger"
    sid = raw.unary(PING, admin_pb2.PingRequest().SerializeToString(), extra=big)
    st = raw.wait_stream(sid)
    assert st.headers.get(":status") == "431", st.header_blocks
    assert st.grpc_status == RESOURCE_EXHAUSTED, st.header_blocks
    # The same connection keeps serving.
    sid = raw.unary(PING, admin_pb2.PingRequest(payload=b"next").SerializeToString())
    st = raw.wait_stream(sid)
    assert st.grpc_status == OK, st.header_blocks
    [reply] = h2raw.grpc_messages(bytes(st.data))
    assert admin_pb2.PingResponse.FromString(reply).payload == b"next"


def test_response_headers_advertise_accept_encoding(raw):
    sid = raw.unary(PING, admin_pb2.PingRequest().SerializeToString())
    st = raw.wait_stream(sid)
    assert st.grpc_status == OK
    assert "identity" in st.headers.get("grpc-accept-encoding", ""), st.header_blocks
    assert st.headers.get("content-type", "").startswith("application/grpc")


def test_max_send_message_flag(start_server):
    srv = start_server(["--max-send-message-bytes", "1000"])
    ch = make_channel(srv.address)
    try:
        stub = test_pb2_grpc.TestServiceStub(ch)
        # A 994-byte body serializes to exactly 1000 bytes of SimpleResponse.
        resp = stub.UnaryCall(messages_pb2.SimpleRequest(response_size=994), timeout=CALL_TIMEOUT)
        assert resp.ByteSize() == 1000
        with pytest.raises(grpc.RpcError) as err:
            stub.UnaryCall(messages_pb2.SimpleRequest(response_size=995), timeout=CALL_TIMEOUT)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # In a stream: the messages before the oversized one arrive, then the status.
        req = messages_pb2.StreamingOutputCallRequest(response_parameters=[
            messages_pb2.ResponseParameters(size=s) for s in (10, 5000, 10)])
        call = stub.StreamingOutputCall(req, timeout=CALL_TIMEOUT)
        assert len(next(call).payload.body) == 10
        with pytest.raises(grpc.RpcError) as err:
            next(call)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        ch.close()


def test_response_over_default_send_limit(testsvc, admin):
    with pytest.raises(grpc.RpcError) as err:
        testsvc.UnaryCall(messages_pb2.SimpleRequest(response_size=DEFAULT_MAX_RECEIVE + 1),
                          timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert admin.Ping(admin_pb2.PingRequest(payload=b"s"), timeout=CALL_TIMEOUT).payload == b"s"


def test_server_obeys_flow_control_windows(server):
    """With a zero initial window the server sends headers but no DATA; then, granted
    1000 bytes at a time, it never sends more than it was granted and finishes."""
    sizes = [100 * 1024, 7, 50 * 1024]
    req = messages_pb2.StreamingOutputCallRequest(response_parameters=[
        messages_pb2.ResponseParameters(size=n) for n in sizes]).SerializeToString()
    total = sum(5 + messages_pb2.StreamingOutputCallResponse(
        payload=messages_pb2.Payload(body=b"\0" * n)).ByteSize() for n in sizes)
    with h2raw.RawH2("127.0.0.1", server.port, auto_window_update=False) as conn:
        conn.preface({0x4: 0})  # SETTINGS_INITIAL_WINDOW_SIZE = 0
        conn.start_reader()
        sid = conn.unary("/grpc.testing.TestService/StreamingOutputCall", req)
        conn.wait_for(lambda c: c.streams[sid].header_blocks, 10, "response headers")
        granted = 0
        for _ in range(1000):  # bounded: ~154 KB in 1000-byte steps
            st = conn.streams[sid]
            assert len(st.data) <= granted, f"received {len(st.data)} bytes, granted {granted}"
            if st.finished:
                break
            conn.window_update(sid, 1000)
            conn.window_update(0, 1000)
            granted += 1000
            # Wait for the server to use the grant (or to finish).
            conn.wait_for(lambda c: len(c.streams[sid].data) >= min(granted, total)
                          or c.streams[sid].finished, 10, "the server to use its window")
        st = conn.wait_stream(sid)
        assert len(st.data) == total <= granted
        assert st.grpc_status == OK, st.header_blocks
        assert [len(messages_pb2.StreamingOutputCallResponse.FromString(m).payload.body)
                for m in h2raw.grpc_messages(bytes(st.data))] == sizes
