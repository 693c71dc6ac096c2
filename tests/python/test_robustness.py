"""Issue 15 "Robustness": inputs and peers that used to hang a call, blow up its trailers,
grow memory without bound, or answer with the wrong status (SPEC §3 transport, §5 limits and
bad input; reasons from docs/errors.md).

Each test states what a correct server does. Calls run through stock grpcio with the default
metadata limits (8 KiB soft / 16 KiB hard for received metadata: what any Python client gets),
or through h2raw where grpcio cannot produce the input. Every call has a deadline well above
what it needs; running into it (DEADLINE_EXCEEDED) means the server never ended the call.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid

import grpc
import pytest
from google.protobuf import json_format
from grpc_health.v1 import health_pb2
from hyperframe.frame import Frame

import h2raw
from conftest import get_stats, make_channel, ping_ok
from ubiq_client import Client, cx, error_of, md, ob, person_model, st, unpack, v, values
from ubiq_harness import REPO_ROOT, RSS_FACTOR, wait_until
from ubiquity.v1 import admin_pb2, admin_pb2_grpc

MiB = 1024 * 1024
KiB = 1024
# A call that needs a second must never take this long; reaching it is a hang.
CALL_DEADLINE = 20
# Bounds on what one failed call's status may carry (the exact cap is the server's choice;
# these are generous, far above any useful message, far below what the defects produced).
MESSAGE_BOUND = 4096            # grpc-message, percent-encoded, bytes
TRAILERS_BOUND = 8 * KiB        # grpc-message + grpc-status-details-bin (base64) + the rest


def notes_model() -> md.Model:
    """examples/notes-model.json, the documented example (Person.email is unique there)."""
    data = json.loads((REPO_ROOT / "examples" / "notes-model.json").read_text())
    return json_format.ParseDict(data, md.Model())


def percent_encoded_len(message: str) -> int:
    """Bytes of grpc-message on the wire (docs/protocol.md: bytes outside 0x20-0x7E and '%'
    are sent as %XX)."""
    return sum(1 if 0x20 <= b <= 0x7E and b != 0x25 else 3 for b in message.encode())


def trailer_size(err: grpc.RpcError) -> int:
    """What the status occupied on the wire, as grpcio saw it: grpc-status + grpc-message
    (percent-encoded) + every trailing metadata entry (-bin values base64-encoded)."""
    total = len("grpc-status") + 2 + len("grpc-message") + percent_encoded_len(err.details() or "")
    for key, value in err.trailing_metadata() or ():
        total += len(key)
        total += (len(value) * 4 + 2) // 3 if key.endswith("-bin") else len(value)
    return total


class Outcome:
    """How one call ended: code, message, reason, violations, elapsed seconds, trailer bytes."""

    def __init__(self, fn):
        t0 = time.monotonic()
        self.response = None
        self.error = None
        try:
            self.response = fn()
            self.code = grpc.StatusCode.OK
            self.message, self.reason, self.violations, self.conflicts = "", None, [], None
            self.trailers = 0
        except grpc.RpcError as e:
            self.error = e
            self.code, self.message, self.reason, self.violations, self.conflicts = error_of(e)
            self.message = self.message or ""
            self.trailers = trailer_size(e)
        self.elapsed = time.monotonic() - t0

    def __repr__(self):
        msg = self.message if len(self.message) <= 300 else (
            f"{self.message[:200]}…({len(self.message)} chars)…{self.message[-60:]}")
        return (f"<{self.code.name} after {self.elapsed:.2f}s reason={self.reason} "
                f"violations={len(self.violations)} trailers≈{self.trailers} B message={msg!r}>")


def assert_bounded_error(out: Outcome, code=grpc.StatusCode.INVALID_ARGUMENT):
    """The call ended with `code` before its deadline, with a bounded status an ordinary
    grpcio client can read (its ErrorInfo reason still decodable)."""
    assert out.code != grpc.StatusCode.DEADLINE_EXCEEDED, f"the call never ended: {out!r}"
    assert out.code == code, f"expected {code.name}: {out!r}"
    assert percent_encoded_len(out.message) < MESSAGE_BOUND, f"grpc-message not bounded: {out!r}"
    assert out.trailers < TRAILERS_BOUND, f"trailers not bounded: {out!r}"
    assert out.reason, f"no ErrorInfo reason decodable from grpc-status-details-bin: {out!r}"


# -- 1. large error messages still end the call with a bounded status -------------------------

LONG_ASCII = "E" * 20_000          # 20,000 characters
LONG_EMOJI = "\U0001F600" * 2_000  # 2,000 characters, 8,000 UTF-8 bytes, 24,000 percent-encoded


def _long_name_calls(c: Client, sid: str, ctx: str):
    return {
        "Stores.Fetch": lambda: c.stores.Fetch(st.FetchRequest(
            store_id=sid, fetch=ob.FetchSpec(entity=LONG_ASCII)), timeout=CALL_DEADLINE),
        "Stores.FetchStream": lambda: list(c.stores.FetchStream(st.FetchRequest(
            store_id=sid, fetch=ob.FetchSpec(entity=LONG_ASCII)), timeout=CALL_DEADLINE)),
        "Contexts.Fetch": lambda: c.contexts.Fetch(cx.ContextFetchRequest(
            context_id=ctx, fetch=ob.FetchSpec(entity=LONG_ASCII)), timeout=CALL_DEADLINE),
        "Stores.BatchInsert": lambda: c.stores.BatchInsert(st.BatchInsertRequest(
            store_id=sid, entity=LONG_EMOJI, objects=[st.ObjectValues(values={"name": v("x")})]),
            timeout=CALL_DEADLINE),
        "Stores.BatchUpdate": lambda: c.stores.BatchUpdate(st.BatchUpdateRequest(
            store_id=sid, entity=LONG_EMOJI, values={"name": v("x")}), timeout=CALL_DEADLINE),
        "Stores.BatchDelete": lambda: c.stores.BatchDelete(st.BatchDeleteRequest(
            store_id=sid, entity=LONG_EMOJI), timeout=CALL_DEADLINE),
        "Stores.Deduplicate": lambda: c.stores.Deduplicate(st.DeduplicateRequest(
            store_id=sid, entity=LONG_EMOJI, unique_key=["name"]), timeout=CALL_DEADLINE),
    }


@pytest.mark.parametrize("method", [
    "Stores.Fetch", "Stores.FetchStream", "Contexts.Fetch", "Stores.BatchInsert",
    "Stores.BatchUpdate", "Stores.BatchDelete", "Stores.Deduplicate"])
def test_long_entity_name_ends_with_bounded_invalid_argument(client, method):
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": "Ann"}])
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui"),
                                        timeout=CALL_DEADLINE).context_id
    out = Outcome(_long_name_calls(client, sid, ctx)[method])
    assert_bounded_error(out)
    # The connection is still good for the next call.
    assert client.fetch(sid, "Person", result_type=ob.RESULT_TYPE_COUNT).count == 1


@pytest.mark.parametrize("where", ["unique_key", "sort", "properties_to_fetch"])
def test_megabyte_key_paths_are_refused_promptly(client, where):
    """A key path of 3 MiB used to cost > 10 s (a 'did you mean' edit distance against every
    property name), found by the fuzz tier with seed 5."""
    sid = client.open(model=person_model())
    huge = "a" * (3 * 1024 * 1024)
    calls = {
        "unique_key": lambda: client.stores.Deduplicate(st.DeduplicateRequest(
            store_id=sid, entity="Person", unique_key=["name", huge]), timeout=CALL_DEADLINE),
        "sort": lambda: client.fetch(sid, "Person", sort_descriptors=[ob.SortDescriptor(key_path=huge)]),
        "properties_to_fetch": lambda: client.fetch(sid, "Person", result_type=ob.RESULT_TYPE_DICTIONARIES,
                                                    properties_to_fetch=[huge]),
    }
    assert_bounded_error(Outcome(calls[where]))


def test_register_model_with_300k_empty_entities_ends_with_bounded_status(client):
    sid = client.open()
    model = md.Model(version_identifier="huge", entities=[md.Entity() for _ in range(300_000)])
    out = Outcome(lambda: client.models.RegisterModel(
        md.RegisterModelRequest(store_id=sid, model=model), timeout=CALL_DEADLINE))
    assert_bounded_error(out)
    # Nothing was registered.
    assert client.models.GetModel(md.GetModelRequest(store_id=sid), timeout=CALL_DEADLINE).version_hash == ""


# -- 2. conflict trailers stay within what a default grpcio client accepts --------------------

def test_merge_conflict_on_large_values_reaches_a_default_client(client, second):
    sid = client.open(model=person_model())
    big_name, big_email = "N" * 5_000, "e" * 4_990 + "@x.test"
    (ann,) = client.insert_people(sid, [{"name": big_name, "email": big_email, "age": 30}])
    second.save(sid, updates=[ob.Update(object_id=ann, expected_version=1,
                                        values={"name": v("M" * 5_000), "age": v(31)})])
    out = Outcome(lambda: client.save(sid, updates=[ob.Update(
        object_id=ann, expected_version=1, values={"email": v("E" * 4_990 + "@x.test")},
        snapshot={"name": v(big_name), "email": v(big_email), "age": v(30)})]))
    assert out.code != grpc.StatusCode.RESOURCE_EXHAUSTED, (
        f"the conflict's trailers exceeded grpcio's default metadata limit: {out!r}")
    assert out.code == grpc.StatusCode.ABORTED, out
    assert out.reason == "MERGE_CONFLICT", out
    assert out.trailers < TRAILERS_BOUND, out
    # Nothing was applied.
    assert values(client.get(sid, [ann]).objects[0])["email"] == big_email


# -- 3. BatchUpdate with unknown attribute names ---------------------------------------------

def test_batch_update_unknown_attribute_with_no_match_is_invalid_argument(client):
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": "Ann", "age": 30}])
    gen = client.current(sid).generation
    out = Outcome(lambda: client.stores.BatchUpdate(st.BatchUpdateRequest(
        store_id=sid, entity="Person", predicate="age == 999", values={"no_such_attribute": v(1)}),
        timeout=CALL_DEADLINE))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT, (
        f"an unknown attribute must be refused whether or not any object matches: {out!r}")
    assert "no_such_attribute" in out.message, out
    assert client.current(sid).generation == gen


def test_batch_update_with_many_unknown_attributes_is_bounded(start_server):
    srv = start_server(name="batchupdate")
    # This client accepts large trailers, so what the server sends can be counted.
    ch = make_channel(srv.address, options=[("grpc.max_metadata_size", 64 * MiB),
                                            ("grpc.absolute_max_metadata_size", 64 * MiB)])
    try:
        c = Client(ch)
        sid = c.open(model=person_model())
        c.insert_people(sid, [{"name": f"P{i}", "age": i} for i in range(10)])
        gen = c.current(sid).generation
        unknown = {f"unknown_attribute_{i:07d}": v(i) for i in range(45_000)}
        request = st.BatchUpdateRequest(store_id=sid, entity="Person", predicate="age >= 0",
                                        values=unknown)
        size = request.ByteSize()
        assert 1.3 * MiB < size < 4 * MiB, size
        rss_before = srv.rss_bytes()
        peak = [rss_before]
        done = threading.Event()

        def sample():
            while not done.is_set():
                try:
                    peak[0] = max(peak[0], srv.rss_bytes())
                except (OSError, RuntimeError):
                    return
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            out = Outcome(lambda: c.stores.BatchUpdate(request, timeout=CALL_DEADLINE))
        finally:
            done.set()
            sampler.join(timeout=5)
        growth = peak[0] - rss_before
        seen = (f"{out!r}; RSS {rss_before / MiB:.1f} -> peak {peak[0] / MiB:.1f} MiB "
                f"(+{growth / MiB:.1f} MiB) for one {size / MiB:.2f} MiB request")
        assert out.code == grpc.StatusCode.INVALID_ARGUMENT, seen
        assert len(out.violations) <= 100, f"{len(out.violations)} BadRequest violations: {seen}"
        assert growth <= 100 * MiB * RSS_FACTOR, f"RSS grew too much: {seen}"
        assert c.current(sid).generation == gen
    finally:
        ch.close()


# -- 4. idle and silent connections ----------------------------------------------------------

HANDSHAKE_MS = 500
IDLE_MS = 1000
TIMEOUT_FLAGS = ["--handshake-timeout-ms", str(HANDSHAKE_MS), "--idle-timeout-ms", str(IDLE_MS)]
# Generous: the server must act after 0.5 s / 1 s; 15 s only catches "never".
CLOSE_BOUND = 15


def _read_until_closed(sock: socket.socket, bound: float) -> tuple[bool, list]:
    """Reads (discarding) until EOF/reset or `bound` seconds; returns (closed, frame types
    seen). Frames are parsed only as far as their 9-byte headers."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + bound
    buf = bytearray()
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, ConnectionAbortedError):
            return True, _frame_types(buf)
        if not chunk:
            return True, _frame_types(buf)
        buf += chunk
    return False, _frame_types(buf)


def _frame_types(buf: bytes) -> list:
    out, i = [], 0
    while len(buf) - i >= 9:
        frame, length = Frame.parse_frame_header(memoryview(buf[i:i + 9]))
        out.append(type(frame).__name__)
        i += 9 + length
    return out


def test_silent_tcp_connection_is_closed_after_handshake_timeout(start_server):
    srv = start_server(TIMEOUT_FLAGS, name="handshake")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        closed, frames = _read_until_closed(s, CLOSE_BOUND)
    assert closed, f"a connection that sent nothing was still open after {CLOSE_BOUND}s (frames: {frames})"
    ping_ok(srv.address)


def test_preface_without_settings_is_closed_after_handshake_timeout(start_server):
    srv = start_server(TIMEOUT_FLAGS, name="preface-only")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(h2raw.PREFACE)  # the magic, but never the SETTINGS frame that completes it
        closed, frames = _read_until_closed(s, CLOSE_BOUND)
    assert closed, f"a connection that sent only the preface was open after {CLOSE_BOUND}s (frames: {frames})"
    ping_ok(srv.address)


def _assert_closed_with_goaway(conn: h2raw.RawH2, what: str) -> None:
    """The server closed `conn` within CLOSE_BOUND, after a GOAWAY(NO_ERROR)."""
    conn.wait_for(lambda c: c.peer_closed, CLOSE_BOUND, f"the server to close {what}")
    assert conn.goaway is not None, f"{what}: closed without a GOAWAY"
    assert conn.goaway.error_code == h2raw.NO_ERROR, conn.goaway


def test_idle_connection_gets_goaway_and_is_closed(start_server):
    srv = start_server(TIMEOUT_FLAGS, name="idle")
    with h2raw.RawH2("127.0.0.1", srv.port) as conn:
        conn.preface()
        conn.start_reader()
        # One completed call, then nothing: the connection is idle from here on.
        sid = conn.unary("/ubiquity.v1.Admin/Ping", admin_pb2.PingRequest(payload=b"i").SerializeToString())
        assert conn.wait_stream(sid).grpc_status == 0
        _assert_closed_with_goaway(conn, f"a connection idle for {IDLE_MS} ms")
        assert conn.goaway.last_stream_id >= sid, conn.goaway
    ping_ok(srv.address)


def test_request_that_stops_arriving_is_failed_and_the_connection_then_idles_out(start_server):
    """HEADERS of a unary call, then silence: the open stream used to keep the connection from
    the idle timeout for ever (found in review: 1,100 of these fill --max-connections)."""
    srv = start_server(TIMEOUT_FLAGS, name="stalled")
    with h2raw.RawH2("127.0.0.1", srv.port) as conn:
        conn.preface()
        conn.start_reader()
        sid = conn.new_stream_id()
        conn.headers(sid, h2raw.grpc_request_headers(conn.authority, "/ubiquity.v1.Admin/Ping"))
        stream = conn.wait_stream(sid, timeout=CLOSE_BOUND)
        assert stream.grpc_status == grpc.StatusCode.DEADLINE_EXCEEDED.value[0], stream.trailers
        _assert_closed_with_goaway(conn, "the connection once idle")
    ping_ok(srv.address)


def test_connection_with_open_stream_is_not_idle(start_server):
    srv = start_server(TIMEOUT_FLAGS, name="watching")
    with h2raw.RawH2("127.0.0.1", srv.port) as conn:
        conn.preface()
        conn.start_reader()
        sid = conn.new_stream_id()
        conn.headers(sid, h2raw.grpc_request_headers(conn.authority, "/grpc.health.v1.Health/Watch"))
        conn.data(sid, h2raw.grpc_frame(health_pb2.HealthCheckRequest(service="").SerializeToString()),
                  end_stream=True)
        conn.wait_for(lambda c: len(c.streams[sid].data) > 0, 10, "the first Watch answer")
        # Three idle timeouts pass with the Watch open: the connection must stay.
        quiet = threading.Event()  # never set: a bounded wait for something that must not happen
        quiet.wait(3 * IDLE_MS / 1000)
        assert conn.goaway is None and not conn.peer_closed, (
            f"a connection with an open Watch stream was ended by the idle timeout: "
            f"goaway={conn.goaway!r} peer_closed={conn.peer_closed}")
        assert not conn.streams[sid].finished
        # Once the stream ends, the connection is idle and goes.
        conn.rst(sid)
        conn.wait_for(lambda c: c.peer_closed, CLOSE_BOUND,
                      "the server to close the connection once its last stream ended")
        assert conn.goaway is not None
    ping_ok(srv.address)


def test_silent_connections_cannot_lock_out_clients(start_server):
    srv = start_server(TIMEOUT_FLAGS + ["--max-connections", "4"], name="lockout")
    silent = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(4)]
    try:
        # All slots are taken by peers that never speak. A real client retries (grpcio's
        # reconnect backoff, shortened) and must be served once the handshake timeout frees them.
        ch = grpc.insecure_channel(srv.address, options=[
            ("grpc.use_local_subchannel_pool", 1), ("grpc.enable_retries", 0),
            ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 1000)])
        try:
            resp = admin_pb2_grpc.AdminStub(ch).Ping(admin_pb2.PingRequest(payload=b"in"),
                                                     timeout=CLOSE_BOUND, wait_for_ready=True)
            assert resp.payload == b"in"
        finally:
            ch.close()
        for s in silent:
            closed, frames = _read_until_closed(s, CLOSE_BOUND)
            assert closed, f"a silent connection outlived the handshake timeout (frames {frames})"
    finally:
        for s in silent:
            s.close()


# -- 5. unread FetchStream calls hold bounded memory -----------------------------------------

def test_unread_fetch_streams_hold_bounded_memory(start_server):
    """docs/protocol.md: a response waits in the call's buffer and `send` suspends the handler
    past 256 KiB, so a client that stops reading stalls only its own call. 200 FetchStream
    calls whose results (4+ MiB each, in ~200 KiB messages) are never read may therefore hold
    about 256 KiB + a message or two each — the bound below allows 256 KiB + 2 messages +
    128 KiB of bookkeeping per call — and all of it must come back once they are reset."""
    srv = start_server(name="unread")
    ch = make_channel(srv.address)
    calls, per_conn = 200, 50
    conns: list[h2raw.RawH2] = []
    try:
        c = Client(ch)
        sid = c.open(model=person_model())
        for b in range(4):  # 2,000 objects of ~2 KiB: one full result is ~4 MiB
            c.stores.BatchInsert(st.BatchInsertRequest(store_id=sid, entity="Person", objects=[
                st.ObjectValues(values={"name": v(f"{b}-{i}-" + "x" * 2048), "age": v(i)})
                for i in range(500)]), timeout=60)
        request = st.FetchRequest(store_id=sid, fetch=ob.FetchSpec(entity="Person", fetch_batch_size=100))
        # Warm up: one full read, so the store, its caches and its mapped pages are in place.
        sizes = [r.ByteSize() for r in c.stores.FetchStream(request, timeout=60)]
        assert sum(sizes) > 4 * MiB, sum(sizes)
        per_call_bound = 256 * KiB + 2 * max(sizes) + 128 * KiB
        baseline_streams = get_stats(ch).open_streams
        rss_before = srv.rss_bytes()
        payload = h2raw.grpc_frame(request.SerializeToString())
        for k in range(calls // per_conn):
            conn = h2raw.RawH2("127.0.0.1", srv.port, auto_window_update=False)
            conns.append(conn)
            conn.preface({0x4: 1024})  # SETTINGS_INITIAL_WINDOW_SIZE: 1 KiB per stream
            conn.start_reader()
            for _ in range(per_conn):
                s = conn.new_stream_id()
                conn.headers(s, h2raw.grpc_request_headers(conn.authority, "/ubiquity.v1.Stores/FetchStream"))
                conn.data(s, payload, end_stream=True)
        # Every call has produced its first response (its headers arrived) ...
        for conn in conns:
            conn.wait_for(lambda c: all(s.header_blocks or s.finished for s in c.streams.values()),
                          60, "every FetchStream call to start answering")
        failed = [(s.grpc_status, s.trailers.get("grpc-message")) for c2 in conns
                  for s in c2.streams.values() if s.finished]
        assert not failed, f"FetchStream calls ended instead of waiting for the reader: {failed[:5]}"
        # ... then the server fills whatever it buffers per call: sample until the peak has
        # not moved for 2 s (at most 15 s).
        peak, last_rise = rss_before, time.monotonic()
        wake = threading.Event()  # never set: Event.wait is only the sampling period
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and time.monotonic() - last_rise < 2:
            rss = srv.rss_bytes()
            if rss > peak:
                peak, last_rise = rss, time.monotonic()
            wake.wait(0.1)
        growth = peak - rss_before
        assert growth < calls * per_call_bound * RSS_FACTOR, (
            f"{calls} unread FetchStream calls grew RSS by {growth / MiB:.1f} MiB "
            f"({growth / calls / MiB:.2f} MiB per call, bound {per_call_bound / MiB:.2f} with "
            f"{max(sizes) / KiB:.0f} KiB messages; {rss_before / MiB:.1f} -> {peak / MiB:.1f} MiB)")
        for conn in conns:
            for s in list(conn.streams):
                conn.rst(s)
        wait_until(lambda: get_stats(ch).open_streams <= baseline_streams, 30,
                   message="the reset FetchStream calls to be released")
        # Freed memory goes back to the kernel at the server's next trim check (every 5 s:
        # docs/operations.md, "Memory"), so give it a few of those.
        try:
            wait_until(lambda: srv.rss_bytes() - rss_before < 64 * MiB * RSS_FACTOR, 20, interval=0.5,
                       message="RSS to come back after the calls were reset")
        except AssertionError:
            pass
        after = srv.rss_bytes()
        assert after - rss_before < 64 * MiB * RSS_FACTOR, (
            f"RSS did not come back after the calls were reset: {rss_before / MiB:.1f} -> "
            f"peak {peak / MiB:.1f} -> {after / MiB:.1f} MiB")
    finally:
        for conn in conns:
            conn.close()
        ch.close()
    ping_ok(srv.address)


# -- 6. deeply nested NOT ----------------------------------------------------------------------

@pytest.mark.parametrize("depth", [22, 40, 63, 64, 65, 200])
@pytest.mark.parametrize("form", ["NOT", "!", "NOT ("])
def test_nested_not_is_answered_or_refused_never_internal(client, form, depth):
    """Up to the documented depth (64) a nested negation is a valid predicate: the answer is
    either the right result or INVALID_ARGUMENT — never INTERNAL (SQLite's parser stack is not
    the client's problem). Past it: INVALID_ARGUMENT naming the limit."""
    sid = client.open(model=person_model())
    client.insert_people(sid, [{"name": "Ann", "age": 1}, {"name": "Bob", "age": 2}])
    if form == "NOT (":
        predicate = "NOT (" * depth + "age == 1" + ")" * depth
    else:
        predicate = (form + " ") * depth + "age == 1"
    out = Outcome(lambda: client.stores.Fetch(st.FetchRequest(
        store_id=sid, fetch=ob.FetchSpec(entity="Person", predicate=predicate)), timeout=CALL_DEADLINE))
    assert out.code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT), (
        f"{depth} nested {form!r}: {out!r}")
    if depth > 64:
        assert out.code == grpc.StatusCode.INVALID_ARGUMENT, out
        assert "64" in out.message and out.reason == "LIMIT_EXCEEDED", out
    elif out.code == grpc.StatusCode.OK:
        got = sorted(unpack(o.values["name"]) for o in out.response.objects)
        assert got == (["Ann"] if depth % 2 == 0 else ["Bob"]), (depth, got)


# -- 7. uniqueness clash with a relationship to the clashing insert ---------------------------

def test_constraint_conflict_with_note_owned_by_clashing_insert_is_aborted(client):
    model = notes_model()
    person = next(e for e in model.entities if e.name == "Person")
    assert [list(u.properties) for u in person.uniqueness_constraints] == [["email"]]
    sid = client.open(model=model)
    client.save(sid, inserts=[ob.Insert(temporary_id="a", entity="Person",
                                        values={"name": v("Ann"), "email": v("ann@x.test")})])
    gen = client.current(sid).generation
    out = Outcome(lambda: client.save(sid, policy=ob.MERGE_POLICY_ERROR, inserts=[
        ob.Insert(temporary_id="p", entity="Person", values={"name": v("Ann 2"), "email": v("ann@x.test")}),
        ob.Insert(temporary_id="n", entity="Note", values={"title": v("hello")},
                  relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(temporary_id="p")])}),
    ]))
    assert out.code == grpc.StatusCode.ABORTED and out.reason == "CONSTRAINT_CONFLICT", out
    assert client.current(sid).generation == gen


# -- 8. migrations in quick succession -------------------------------------------------------

def test_two_migrations_within_one_second_both_succeed(client):
    sid = client.open()
    A = md.Attribute
    v1 = person_model("v1")
    v2 = person_model("v2", extra_person_attrs=[A(name="nickname", type=md.ATTRIBUTE_TYPE_STRING)])
    v3 = person_model("v3", extra_person_attrs=[A(name="nickname", type=md.ATTRIBUTE_TYPE_STRING),
                                                A(name="city", type=md.ATTRIBUTE_TYPE_STRING)])
    client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=v1), timeout=60)
    client.insert_people(sid, [{"name": "Ann"}])
    hashes = []
    for model in (v2, v3):  # back to back: both within the same second
        out = Outcome(lambda: client.models.RegisterModel(
            md.RegisterModelRequest(store_id=sid, model=model), timeout=60))
        assert out.code == grpc.StatusCode.OK, f"migration to {model.version_identifier}: {out!r}"
        hashes.append(out.response.version_hash)
    got = client.models.GetModel(md.GetModelRequest(store_id=sid), timeout=CALL_DEADLINE)
    assert got.version_hash == hashes[-1]
    person = next(e for e in got.model.entities if e.name == "Person")
    assert {"nickname", "city"} <= {a.name for a in person.attributes}
    client.save(sid, inserts=[ob.Insert(temporary_id="b", entity="Person",
                                        values={"name": v("Bob"), "city": v("Oslo")})])
    assert [unpack(o.values["name"]) for o in client.fetch(sid, "Person", predicate='city == "Oslo"').objects] == ["Bob"]


# -- 9. a destroyed and re-created store ------------------------------------------------------

def test_token_of_destroyed_store_is_store_replaced_after_recreation(client):
    name = f"recreated-{uuid.uuid4()}"
    old = client.stores.OpenStore(st.OpenStoreRequest(name=name), timeout=CALL_DEADLINE).store.store_id
    client.models.RegisterModel(md.RegisterModelRequest(store_id=old, model=person_model()), timeout=60)
    client.insert_people(old, [{"name": "Ann"}])
    token = client.current(old).token
    client.stores.DestroyStore(st.DestroyStoreRequest(store_id=old), timeout=CALL_DEADLINE)
    new = client.stores.OpenStore(st.OpenStoreRequest(name=name), timeout=CALL_DEADLINE)
    assert new.created
    sid = new.store.store_id
    client.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=person_model()), timeout=60)
    client.insert_people(sid, [{"name": "Bob"}])
    out = Outcome(lambda: client.fetch(sid, "Person", token=token))
    assert out.code == grpc.StatusCode.FAILED_PRECONDITION and out.reason == "STORE_REPLACED", (
        f"old store id {old}, new {sid}: {out!r}")


# -- 10. values out of type or range are refused where they enter ------------------------------

def _ratio_model():
    return person_model(extra_person_attrs=[md.Attribute(name="ratio", type=md.ATTRIBUTE_TYPE_FLOAT)])


def test_context_insert_string_for_int32_fails_at_once(client):
    sid = client.open(model=person_model())
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui"),
                                        timeout=CALL_DEADLINE).context_id
    out = Outcome(lambda: client.contexts.Insert(cx.ContextInsertRequest(context_id=ctx, inserts=[
        ob.Insert(temporary_id="a", entity="Person", values={"name": v("Ann"), "age": v("old")})]),
        timeout=CALL_DEADLINE))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT, (
        f"a string for an int32 attribute was accepted into the context: {out!r}")
    assert "age" in out.message, out
    state = client.contexts.GetState(cx.ContextRequest(context_id=ctx), timeout=CALL_DEADLINE)
    assert state.inserted_count == 0


def test_float_attribute_out_of_range_in_save(client):
    sid = client.open(model=_ratio_model())
    gen = client.current(sid).generation
    out = Outcome(lambda: client.save(sid, inserts=[ob.Insert(
        temporary_id="a", entity="Person", values={"name": v("Ann"), "ratio": v(1e300)})]))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT, f"1e300 stored in a float attribute: {out!r}"
    assert "ratio" in out.message, out
    assert client.current(sid).generation == gen


def test_float_attribute_out_of_range_in_context_insert(client):
    sid = client.open(model=_ratio_model())
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui"),
                                        timeout=CALL_DEADLINE).context_id
    out = Outcome(lambda: client.contexts.Insert(cx.ContextInsertRequest(context_id=ctx, inserts=[
        ob.Insert(temporary_id="a", entity="Person", values={"name": v("Ann"), "ratio": v(1e300)})]),
        timeout=CALL_DEADLINE))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT, f"1e300 accepted for a float attribute: {out!r}"
    assert "ratio" in out.message, out


# -- 11. inverse relationships of pending changes ---------------------------------------------

def test_context_sees_inverse_of_pending_relationship(client):
    sid = client.open(model=person_model())
    (carol,) = client.insert_people(sid, [{"name": "Carol"}])
    client.insert_people(sid, [{"name": "Dave"}])
    ctx = client.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="ui"),
                                        timeout=CALL_DEADLINE).context_id
    ins = client.contexts.Insert(cx.ContextInsertRequest(context_id=ctx, inserts=[
        ob.Insert(temporary_id="n", entity="Note", values={"title": v("draft")},
                  relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(object_id=carol)])})]),
        timeout=CALL_DEADLINE)
    note = ins.object_ids["n"]

    def fetch(predicate):
        return client.contexts.Fetch(cx.ContextFetchRequest(context_id=ctx, fetch=ob.FetchSpec(
            entity="Person", predicate=predicate)), timeout=CALL_DEADLINE).objects

    found = fetch('ANY notes.title == "draft"')
    assert [unpack(o.values["name"]) for o in found] == ["Carol"], (
        "a pending note's owner is not found through the inverse to-many")
    [c] = fetch('name == "Carol"')
    assert list(c.relationships["notes"].object_ids) == [note], (
        f"Carol's notes in the context: {list(c.relationships['notes'].object_ids)}, expected [{note}]")


# -- 12. reasons as docs/errors.md lists them -------------------------------------------------

def test_token_of_another_store_is_bad_token(client):
    a = client.open(model=person_model())
    b = client.open(model=person_model())
    out = Outcome(lambda: client.fetch(a, "Person", token=client.current(b).token))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT and out.reason == "BAD_TOKEN", out


def test_save_without_model_is_no_model_like_fetch(client):
    sid = client.open()
    fetch = Outcome(lambda: client.fetch(sid, "Person"))
    save = Outcome(lambda: client.save(sid, inserts=[ob.Insert(temporary_id="a", entity="Person",
                                                               values={"name": v("Ann")})]))
    seen = f"Fetch: {fetch!r}; Save: {save!r}"
    assert fetch.code == grpc.StatusCode.FAILED_PRECONDITION and fetch.reason == "NO_MODEL", seen
    assert save.code == grpc.StatusCode.FAILED_PRECONDITION and save.reason == "NO_MODEL", seen


def test_predicate_error_states_its_column_once(client):
    sid = client.open(model=person_model())
    out = Outcome(lambda: client.fetch(sid, "Person", predicate="age == "))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT and out.reason == "PREDICATE_SYNTAX", out
    assert out.message.count("column") == 1, f"column stated more than once: {out.message!r}"
    [fv] = out.violations
    assert fv.description.count("column") == 1, fv.description


# -- found by test_fuzz.py: non-finite numbers in a model -------------------------------------

@pytest.mark.parametrize("where,value", [
    ("minimum", float("nan")), ("maximum", float("nan")), ("default_value", float("nan")),
    ("minimum", float("-inf")), ("maximum", float("inf")), ("default_value", float("inf"))])
def test_register_model_with_non_finite_numbers_is_never_internal(client, where, value):
    """A NaN bound or default means nothing: INVALID_ARGUMENT. An infinite one may be taken
    (and must then come back from GetModel) or refused — never INTERNAL (today the model's
    JSON encoding throws and the call answers INTERNAL)."""
    sid = client.open()
    extra = {"default_value": v(value)} if where == "default_value" else {where: value}
    attr = md.Attribute(name="x", type=md.ATTRIBUTE_TYPE_DOUBLE, **extra)
    out = Outcome(lambda: client.models.RegisterModel(md.RegisterModelRequest(
        store_id=sid, model=person_model(extra_person_attrs=[attr])), timeout=CALL_DEADLINE))
    if value != value:  # NaN
        assert out.code == grpc.StatusCode.INVALID_ARGUMENT, out
        assert "x" in out.message, out
    else:
        assert out.code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT), out
        if out.code == grpc.StatusCode.OK:
            got = client.models.GetModel(md.GetModelRequest(store_id=sid), timeout=CALL_DEADLINE)
            person = next(e for e in got.model.entities if e.name == "Person")
            x = next(a for a in person.attributes if a.name == "x")
            back = unpack(x.default_value) if where == "default_value" else getattr(x, where)
            assert back == value, (where, back)


def test_nan_values_are_refused_not_stored_as_null(client):
    """SQLite keeps NaN as NULL: a NaN double used to be accepted and read back as nil."""
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "Ann", "score": 1.5}])
    for call in (lambda: client.insert_people(sid, [{"name": "N", "score": float("nan")}]),
                 lambda: client.save(sid, updates=[ob.Update(object_id=ann, values={"score": v(float("nan"))})])):
        out = Outcome(call)
        assert_bounded_error(out)
        assert out.reason == "VALIDATION_FAILED"
    assert client.fetch(sid, "Person", result_type=ob.RESULT_TYPE_COUNT).count == 1
    # infinities are numbers SQLite keeps: stored and read back as they were
    client.save(sid, updates=[ob.Update(object_id=ann, values={"score": v(float("inf"))})])
    assert values(client.get(sid, [ann]).objects[0])["score"] == float("inf")


def test_nul_characters_in_text_and_patterns(client):
    """Found by scripts/fuzz: text with a NUL came back cut at it (SQLite columns were read as C
    strings), and LIKE-family patterns with a NUL matched differently in SQL (GLOB stops at NUL)
    than in memory."""
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "a\0b"}])
    assert values(client.get(sid, [ann]).objects[0])["name"] == "a\0b"
    assert [o.object_id for o in client.fetch(sid, "Person", "name == 'a\0b'").objects] == [ann]
    assert [o.object_id for o in client.fetch(sid, "Person", "name MATCHES 'a\0.'").objects] == [ann]
    for op in ("LIKE", "BEGINSWITH", "ENDSWITH", "CONTAINS"):
        out = Outcome(lambda: client.fetch(sid, "Person", f"name {op}[c] '\0x'"))
        assert_bounded_error(out)
        assert out.reason == "UNSUPPORTED" and "NUL" in out.message, out
