"""A deliberately low-level HTTP/2 client for protocol and abuse tests.

Frames are built with `hyperframe` and header blocks with `hpack`, and written to a
plain socket or a TLS session, so a test can send exactly what a broken or hostile peer
would send (which the `h2` state machine would refuse to produce). A background reader
thread (optional) parses what the server sends back, acknowledges SETTINGS and PING like a
real client, and records per-stream headers, data, END_STREAM and RST_STREAM.

The reader and the test's thread both use the connection. A plain socket allows one
thread sending while another receives; a Python `ssl.SSLSocket` does not (one `SSL`
object, used from two threads). So TLS runs through `TLSIO`: an `ssl.SSLObject` over
memory BIOs, used under a lock, while the TCP socket underneath does the waiting.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field

import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DEFAULT_MAX_FRAME = 16384

# RFC 9113 error codes used in assertions.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
CANCEL = 0x8
ENHANCE_YOUR_CALM = 0xB


def grpc_frame(message: bytes, compressed: bool = False) -> bytes:
    """The 5-byte gRPC length prefix + message."""
    return struct.pack(">BI", 1 if compressed else 0, len(message)) + message


def grpc_messages(data: bytes) -> list[bytes]:
    """Splits a gRPC DATA payload into messages (raises on a truncated frame)."""
    out = []
    i = 0
    while i < len(data):
        if len(data) - i < 5:
            raise ValueError(f"truncated gRPC frame header at {i}: {data[i:]!r}")
        _flag, length = struct.unpack(">BI", data[i:i + 5])
        if len(data) - i - 5 < length:
            raise ValueError("truncated gRPC message")
        out.append(data[i + 5:i + 5 + length])
        i += 5 + length
    return out


def grpc_request_headers(authority: str, path: str, extra=(), content_type="application/grpc",
                         timeout: str | None = None):
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
        ("content-type", content_type),
        ("te", "trailers"),
    ]
    if timeout is not None:
        headers.append(("grpc-timeout", timeout))
    if path.split("/")[1:2] and path.split("/")[1] in DATA_SERVICES:
        # the test server's session (docs/accounts.md), as every suite channel sends it
        import ubiq_harness
        headers.extend(ubiq_harness.auth_metadata(authority))
    headers.extend(extra)
    return headers


DATA_SERVICES = {"ubiquity.v1.Stores", "ubiquity.v1.Contexts", "ubiquity.v1.Models", "ubiquity.v1.Changes",
                 "ubiquity.v1.KeyValue"}


@dataclass
class StreamState:
    header_blocks: list = field(default_factory=list)   # list of list[(name, value)]
    data: bytearray = field(default_factory=bytearray)
    ended: bool = False           # END_STREAM seen from the server
    reset: int | None = None      # RST_STREAM error code from the server

    @property
    def headers(self) -> dict:
        """First header block (response headers) as a dict of str -> str."""
        return dict(self.header_blocks[0]) if self.header_blocks else {}

    @property
    def trailers(self) -> dict:
        """Last header block if it ended the stream (trailers or Trailers-Only)."""
        if self.ended and self.header_blocks:
            return dict(self.header_blocks[-1])
        return {}

    @property
    def grpc_status(self) -> int | None:
        value = self.trailers.get("grpc-status")
        return int(value) if value is not None else None

    @property
    def finished(self) -> bool:
        return self.ended or self.reset is not None


class TLSIO:
    """TLS for a socket that one thread reads while others write.

    Only the `SSLObject` (pure computation over two memory BIOs) is serialised, by
    `_tls_lock`; no one holds that lock while blocked on the network, so a writer stuck in
    `sendall` (a server that stopped reading) never keeps the reader from reading. Records
    leave in the order they were sealed because sealing and sending happen together under
    `_wire_lock`. The handshake completes in the constructor, before any reader starts.
    """

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str):
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self._tls_lock = threading.Lock()
        self._wire_lock = threading.Lock()
        while True:
            try:
                with self._tls_lock:
                    self._tls.do_handshake()
                self._flush()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._receive():
                    raise ConnectionResetError("server closed the connection during the TLS handshake")
        self.selected_alpn = self._tls.selected_alpn_protocol()

    def _flush(self) -> None:
        with self._wire_lock:
            with self._tls_lock:
                sealed = self._outgoing.read()
            if sealed:
                self.sock.sendall(sealed)

    def _receive(self) -> bool:
        """Moves one chunk of ciphertext from the socket into the TLS object; False at EOF."""
        chunk = self.sock.recv(65536)
        with self._tls_lock:
            if not chunk:
                self._incoming.write_eof()
                return False
            self._incoming.write(chunk)
        return True

    def sendall(self, data: bytes) -> None:
        with self._wire_lock:
            with self._tls_lock:
                view = memoryview(data)
                while view:  # a memory BIO takes everything; the loop covers partial writes
                    view = view[self._tls.write(view):]
                sealed = self._outgoing.read()
            self.sock.sendall(sealed)

    def recv(self, n: int) -> bytes:
        """Up to n plaintext bytes; b"" at the end of the connection. Socket timeouts and
        errors propagate as they would from a plain socket."""
        while True:
            with self._tls_lock:
                try:
                    return self._tls.read(n)
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    return b""
            if not self._receive():
                continue  # read() now reports the end (cleanly or not)


class _PlainIO:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.selected_alpn = None
        self.sendall = sock.sendall
        self.recv = sock.recv


def client_tls_context(ca_file: str, alpn=("h2",)) -> ssl.SSLContext:
    """What a gRPC client over TLS offers: the test CA trusted, ALPN h2."""
    ctx = ssl.create_default_context(cafile=ca_file)
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


class RawH2:
    """One client-side HTTP/2 connection to the server under test: h2c, or TLS when given
    a client `tls` context (the server's certificate names "localhost")."""

    def __init__(self, host: str, port: int, rcvbuf: int | None = None, timeout: float = 10.0,
                 auto_window_update: bool = True, tls: ssl.SSLContext | None = None):
        self.host = host
        self.port = port
        self.authority = f"{host}:{port}"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            # Must be set before connect() to bound the advertised TCP window.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.io = _PlainIO(self.sock) if tls is None else TLSIO(self.sock, tls, "localhost")
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 24
        self.decoder.max_allowed_table_size = 1 << 16
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self.streams: dict[int, StreamState] = {}
        self.goaway: GoAwayFrame | None = None
        self.server_settings: dict = {}
        self.frames_received: dict[str, int] = {}
        self.peer_closed = False      # EOF or reset seen while reading
        self.send_failed = False      # a write failed (peer closed / reset)
        self.send_blocked = False     # a write timed out (peer not reading)
        self.reader_error: BaseException | None = None
        self.bytes_received = 0
        self._reader: threading.Thread | None = None
        self._pending_headers: tuple[int, bytearray, bool] | None = None
        self.next_stream_id = 1
        # When False, the test grants all receive window itself (flow-control tests).
        self.auto_window_update = auto_window_update

    # -- sending -----------------------------------------------------------

    def send_bytes(self, data: bytes) -> bool:
        """Writes data; False if the connection is gone (peer closed or reset)."""
        with self._send_lock:
            try:
                self.io.sendall(data)
                return True
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ssl.SSLError):
                self.send_failed = True
                return False
            except TimeoutError:
                # The server stopped reading this connection (back-pressure); the
                # frame may be half-written, so the connection is unusable now.
                self.send_blocked = True
                return False

    def send_frame(self, frame: Frame) -> bool:
        return self.send_bytes(frame.serialize())

    def preface(self, settings: dict | None = None, window_increment: int = 0) -> bool:
        sf = SettingsFrame(0)
        for k, v in (settings or {}).items():
            sf.settings[k] = v
        data = PREFACE + sf.serialize()
        if window_increment:
            data += WindowUpdateFrame(0, window_increment=window_increment).serialize()
        return self.send_bytes(data)

    def new_stream_id(self) -> int:
        sid = self.next_stream_id
        self.next_stream_id += 2
        return sid

    def encode_headers(self, stream_id: int, headers, end_stream: bool,
                       max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
        """HPACK-encodes headers (this connection's encoder) into HEADERS+CONTINUATION."""
        return self.frame_header_block(stream_id, self.encoder.encode(headers), end_stream,
                                       max_frame)

    @staticmethod
    def frame_header_block(stream_id: int, block: bytes, end_stream: bool,
                           max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
        """Frames an already encoded header block as HEADERS + CONTINUATION frames."""
        chunks = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
        out = bytearray()
        hf = HeadersFrame(stream_id, chunks[0])
        if end_stream:
            hf.flags.add("END_STREAM")
        if len(chunks) == 1:
            hf.flags.add("END_HEADERS")
        out += hf.serialize()
        for i, chunk in enumerate(chunks[1:], start=2):
            cf = ContinuationFrame(stream_id, chunk)
            if i == len(chunks):
                cf.flags.add("END_HEADERS")
            out += cf.serialize()
        return bytes(out)

    def headers(self, stream_id: int, headers, end_stream: bool = False) -> bool:
        with self._cond:
            self.streams.setdefault(stream_id, StreamState())
        return self.send_bytes(self.encode_headers(stream_id, headers, end_stream))

    def data(self, stream_id: int, payload: bytes, end_stream: bool = False) -> bool:
        out = bytearray()
        view = memoryview(payload)
        if not payload:
            df = DataFrame(stream_id, b"")
            if end_stream:
                df.flags.add("END_STREAM")
            return self.send_frame(df)
        for i in range(0, len(payload), DEFAULT_MAX_FRAME):
            chunk = bytes(view[i:i + DEFAULT_MAX_FRAME])
            df = DataFrame(stream_id, chunk)
            if end_stream and i + DEFAULT_MAX_FRAME >= len(payload):
                df.flags.add("END_STREAM")
            out += df.serialize()
        return self.send_bytes(bytes(out))

    def rst(self, stream_id: int, code: int = CANCEL) -> bool:
        return self.send_frame(RstStreamFrame(stream_id, error_code=code))

    def ping(self, opaque: bytes = b"\0" * 8) -> bool:
        return self.send_frame(PingFrame(0, opaque_data=opaque))

    def window_update(self, stream_id: int, increment: int) -> bool:
        return self.send_frame(WindowUpdateFrame(stream_id, window_increment=increment))

    def unary(self, path: str, message: bytes, extra=(), timeout: str | None = None,
              content_type: str = "application/grpc") -> int:
        """Starts a complete unary call (HEADERS + one message + END_STREAM)."""
        sid = self.new_stream_id()
        self.headers(sid, grpc_request_headers(self.authority, path, extra, content_type, timeout))
        self.data(sid, grpc_frame(message), end_stream=True)
        return sid

    # -- receiving ---------------------------------------------------------

    def start_reader(self) -> "RawH2":
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        return self

    def _read_exact(self, n: int, buf: bytearray) -> bytes | None:
        while len(buf) < n:
            try:
                chunk = self.io.recv(max(65536, n - len(buf)))
            except socket.timeout:
                continue
            except (ConnectionResetError, ConnectionAbortedError, OSError):
                return None
            if not chunk:
                return None
            self.bytes_received += len(chunk)
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def _read_loop(self) -> None:
        buf = bytearray()
        try:
            self.sock.settimeout(1.0)
            while True:
                header = self._read_exact(9, buf)
                if header is None:
                    break
                frame, length = Frame.parse_frame_header(memoryview(header))
                body = self._read_exact(length, buf) if length else b""
                if body is None:
                    break
                frame.parse_body(memoryview(body))
                self._on_frame(frame)
        except BaseException as e:  # recorded for the test to report
            self.reader_error = e
        finally:
            with self._cond:
                self.peer_closed = True
                self._cond.notify_all()

    def _on_frame(self, frame: Frame) -> None:
        name = type(frame).__name__
        with self._cond:
            self.frames_received[name] = self.frames_received.get(name, 0) + 1
        if isinstance(frame, SettingsFrame):
            if "ACK" not in frame.flags:
                with self._cond:
                    self.server_settings.update(frame.settings)
                ack = SettingsFrame(0)
                ack.flags.add("ACK")
                self.send_frame(ack)
        elif isinstance(frame, PingFrame):
            if "ACK" not in frame.flags:
                pong = PingFrame(0, opaque_data=frame.opaque_data)
                pong.flags.add("ACK")
                self.send_frame(pong)
        elif isinstance(frame, GoAwayFrame):
            with self._cond:
                self.goaway = frame
        elif isinstance(frame, (HeadersFrame, ContinuationFrame)):
            if isinstance(frame, HeadersFrame):
                self._pending_headers = (frame.stream_id, bytearray(frame.data),
                                         "END_STREAM" in frame.flags)
            else:
                assert self._pending_headers is not None, "CONTINUATION without HEADERS"
                self._pending_headers[1].extend(frame.data)
            if "END_HEADERS" in frame.flags:
                sid, block, end = self._pending_headers
                self._pending_headers = None
                decoded = [(k.decode() if isinstance(k, bytes) else k,
                            v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
                           for k, v in self.decoder.decode(bytes(block), raw=True)]
                with self._cond:
                    st = self.streams.setdefault(sid, StreamState())
                    st.header_blocks.append(decoded)
                    if end:
                        st.ended = True
        elif isinstance(frame, DataFrame):
            if frame.flow_controlled_length and self.auto_window_update:
                # Give the window straight back, like a client that keeps reading.
                self.window_update(0, frame.flow_controlled_length)
                if "END_STREAM" not in frame.flags:
                    self.window_update(frame.stream_id, frame.flow_controlled_length)
            with self._cond:
                st = self.streams.setdefault(frame.stream_id, StreamState())
                st.data += frame.data
                if "END_STREAM" in frame.flags:
                    st.ended = True
        elif isinstance(frame, RstStreamFrame):
            with self._cond:
                st = self.streams.setdefault(frame.stream_id, StreamState())
                st.reset = frame.error_code
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float = 10.0, message: str = "condition"):
        """Waits (bounded) until predicate(self) is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self)
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"timed out after {timeout}s waiting for {message}; streams="
                        f"{ {k: (v.header_blocks, len(v.data), v.ended, v.reset) for k, v in self.streams.items()} }"
                        f" goaway={self.goaway!r} peer_closed={self.peer_closed}")
                self._cond.wait(min(remaining, 0.2))

    def wait_stream(self, stream_id: int, timeout: float = 10.0) -> StreamState:
        self.wait_for(lambda c: c.streams.get(stream_id) and c.streams[stream_id].finished
                      or c.peer_closed, timeout, f"stream {stream_id} to finish")
        with self._cond:
            return self.streams.setdefault(stream_id, StreamState())

    def wait_closed(self, timeout: float = 10.0) -> None:
        """Waits until the server closed the connection (EOF/reset)."""
        self.wait_for(lambda c: c.peer_closed, timeout, "the server to close the connection")

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self._reader is not None:
            self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
