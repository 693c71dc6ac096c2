"""pytest wiring for the end-to-end suite.

- Generates Python stubs for Protos/ and the interop protos into a temporary
  directory before any test module is imported (nothing generated is committed).
- `server`: one real ubiquityd for the session (--enable-interop-testing); at the end
  it gets SIGTERM and must exit 0 within a bound.
- `start_server`: a factory for extra instances a test owns (abuse, shutdown tests).
- When a test fails, the stderr every server wrote during it is attached to the report.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ubiq_harness  # noqa: E402

_GEN_DIR = Path(tempfile.mkdtemp(prefix="ubiq-pytest-gen-"))
atexit.register(shutil.rmtree, _GEN_DIR, True)
sys.path.insert(0, str(ubiq_harness.generate_stubs(_GEN_DIR)))

import grpc  # noqa: E402

from ubiquity.v1 import admin_pb2, admin_pb2_grpc  # noqa: E402

# Servers started in this session, and where each one's stderr stood when the
# current test began (so a failure shows only what that test caused).
_SERVERS: list[ubiq_harness.Ubiquityd] = []
_OFFSETS: dict[int, int] = {}

GRACE_SECONDS = 10
EXIT_BOUND_SECONDS = GRACE_SECONDS + 20

CHANNEL_OPTIONS = [
    # Every channel gets its own TCP connection (grpcio would otherwise share one
    # between channels to the same address), so "a second client" really is one.
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.enable_http_proxy", 0),
    ("grpc.enable_retries", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


DATA_SERVICES = {"ubiquity.v1.Stores", "ubiquity.v1.Contexts", "ubiquity.v1.Models", "ubiquity.v1.Changes",
                 "ubiquity.v1.KeyValue"}


class _Auth(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
            grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the server's session (`ubiq_harness.auth_metadata`, looked up per call so a
    restarted server's new session is used) unless the call sets `authorization` itself."""

    def __init__(self, address: str, channel: grpc.Channel):
        self.address = address
        self.channel = channel  # the raw channel, for signing in without another connection

    def _details(self, d):
        md = list(d.metadata or ())
        method = d.method.decode() if isinstance(d.method, bytes) else d.method
        # only data services need a session; Admin, Health and reflection stay open
        if any(k == "authorization" for k, _ in md) or method.split("/")[1:2][0] not in DATA_SERVICES:
            return d
        md += ubiq_harness.auth_metadata(self.address, self.channel)
        fields = {f: getattr(d, f, None) for f in ("method", "timeout", "credentials", "wait_for_ready", "compression")}
        return _CallDetails(metadata=md, **fields)

    def intercept_unary_unary(self, continuation, d, request):
        return continuation(self._details(d), request)

    def intercept_unary_stream(self, continuation, d, request):
        return continuation(self._details(d), request)

    def intercept_stream_unary(self, continuation, d, requests):
        return continuation(self._details(d), requests)

    def intercept_stream_stream(self, continuation, d, requests):
        return continuation(self._details(d), requests)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method, self.timeout, self.metadata = method, timeout, metadata
        self.credentials, self.wait_for_ready, self.compression = credentials, wait_for_ready, compression


def make_channel(address: str, options=(), credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
    """A ready channel: h2c, or TLS with `credentials` (test certificates name "localhost"),
    whose data-service calls carry that server's session (see `_Auth`)."""
    if credentials is None:
        ch = grpc.insecure_channel(address, options=CHANNEL_OPTIONS + list(options))
    else:
        ch = grpc.secure_channel(address, credentials, options=CHANNEL_OPTIONS + [
            ("grpc.ssl_target_name_override", "localhost")] + list(options))
    grpc.channel_ready_future(ch).result(timeout=15)
    return grpc.intercept_channel(ch, _Auth(address, ch))


def channel_for(server: ubiq_harness.Ubiquityd, options=()) -> grpc.Channel:
    """A ready channel to `server`, over TLS when it serves TLS (its `credentials`)."""
    return make_channel(server.address, options, server.credentials)


def get_stats(channel: grpc.Channel) -> admin_pb2.ServerStats:
    return admin_pb2_grpc.AdminStub(channel).GetServerStats(
        admin_pb2.GetServerStatsRequest(), timeout=10)


def ping_ok(address: str, payload: bytes = b"still-serving",
            credentials: grpc.ChannelCredentials | None = None) -> None:
    """A separate, well-behaved grpcio client on a new connection gets an answer."""
    ch = make_channel(address, credentials=credentials)
    try:
        resp = admin_pb2_grpc.AdminStub(ch).Ping(admin_pb2.PingRequest(payload=payload), timeout=10)
        assert resp.payload == payload
    finally:
        ch.close()


def _register(server: ubiq_harness.Ubiquityd) -> None:
    _SERVERS.append(server)
    _OFFSETS[id(server)] = 0


@atexit.register
def _kill_leftover_servers() -> None:
    # Only reached with servers still running if the run was interrupted.
    for srv in _SERVERS:
        srv.kill()


@pytest.fixture(scope="session")
def server_binary() -> Path:
    try:
        return ubiq_harness.find_server_binary()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def server_workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="session")
def server(server_binary, server_workdir):
    """The shared ubiquityd (interop service enabled). Exits 0 on SIGTERM at the end."""
    srv = ubiq_harness.Ubiquityd(
        server_binary, server_workdir, name="shared",
        args=["--shutdown-grace-seconds", str(GRACE_SECONDS)])
    _register(srv)
    srv.start()
    yield srv
    if not srv.alive():
        rc = srv.wait(5)
        pytest.fail(f"shared ubiquityd died during the session (exit {rc})\n{srv.stderr_tail()}")
    rc = srv.stop(timeout=EXIT_BOUND_SECONDS)
    assert rc == 0, f"shared ubiquityd exited {rc} after SIGTERM\n{srv.stderr_tail()}"


@pytest.fixture(scope="session")
def channel(server):
    ch = make_channel(server.address)
    yield ch
    # Nothing leaked over the whole session: every stream and every connection but
    # this channel's own were released (the stats call may count itself).
    if server.alive():
        last = []

        def released():
            last[:] = [get_stats(ch)]
            return last[0].open_streams <= 1 and last[0].open_connections <= 1

        try:
            ubiq_harness.wait_until(released, 15, message=(
                "the shared server to release all streams and connections "
                "(open_streams <= 1, open_connections <= 1)"))
        except AssertionError as e:
            raise AssertionError(f"{e}; last stats: {last[0] if last else None}") from None
        finally:
            ch.close()
    else:
        ch.close()


@pytest.fixture(scope="session")
def admin(channel):
    return admin_pb2_grpc.AdminStub(channel)


@pytest.fixture
def client(server):
    """A data-service client (ubiq_client.Client) of the shared server, on a channel of its own
    with grpcio's default limits."""
    from ubiq_client import Client
    ch = make_channel(server.address)
    yield Client(ch)
    ch.close()


@pytest.fixture
def second(server):
    """Another client of the shared server (a second device), on its own channel."""
    from ubiq_client import Client
    ch = make_channel(server.address)
    yield Client(ch)
    ch.close()


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """A test CA (and another one), with server and client certificates from each (tls_material)."""
    import tls_material
    d = tmp_path_factory.mktemp("pki")
    ca = tls_material.make_ca(d, "ubiq-test-ca")
    other_ca = tls_material.make_ca(d, "other-ca")
    return {
        "dir": d,
        "ca": ca,
        "other_ca": other_ca,
        "server": tls_material.make_leaf(ca, d, "server", server=True),
        "server_other": tls_material.make_leaf(other_ca, d, "server-other", server=True),
        "client": tls_material.make_leaf(ca, d, "client", server=False),
        "client_other": tls_material.make_leaf(other_ca, d, "client-other", server=False),
    }


@pytest.fixture
def start_server(server_binary, tmp_path):
    """Factory: start_server(args=[...], name=..., interop=True, port=0) -> a started Ubiquityd.

    Every instance still running at the end of the test gets SIGTERM and must exit 0.
    """
    started: list[ubiq_harness.Ubiquityd] = []

    def start(args=(), name=None, interop=True, port=0, credentials=None):
        """`credentials`: grpc channel credentials for a server started with --tls-cert."""
        name = name or f"instance{len(started) + 1}"
        args = list(args)
        if "--shutdown-grace-seconds" not in args:
            args += ["--shutdown-grace-seconds", str(GRACE_SECONDS)]
        srv = ubiq_harness.Ubiquityd(server_binary, tmp_path, name=name, args=args,
                                     interop=interop, port=port)
        srv.credentials = credentials
        _register(srv)
        started.append(srv)
        srv.start()
        return srv

    yield start

    problems = []
    for srv in started:
        if srv.proc is None:
            continue
        if srv.alive():
            leak = _leak_check(srv)
            if leak:
                problems.append(leak)
            try:
                rc = srv.stop(timeout=EXIT_BOUND_SECONDS)
            except AssertionError as e:
                problems.append(str(e))
                continue
            if rc != 0:
                problems.append(f"{srv.name} exited {rc} after SIGTERM\n{srv.stderr_tail()}")
        srv.cleanup_data()
    for srv in started:
        if srv in _SERVERS:
            _SERVERS.remove(srv)
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def _leak_check(srv: ubiq_harness.Ubiquityd) -> str | None:
    """Once a test's clients are gone, the server holds no stream and no connection
    but the checking one (the stats call may count itself)."""
    last = []
    try:
        ch = channel_for(srv)
    except Exception as e:  # noqa: BLE001 - reported, not raised, in teardown
        return f"{srv.name}: could not connect for the leak check: {e!r}"
    try:
        def released():
            last[:] = [get_stats(ch)]
            return last[0].open_streams <= 1 and last[0].open_connections <= 1

        ubiq_harness.wait_until(released, 15, message="streams and connections released")
        return None
    except AssertionError:
        return (f"{srv.name}: streams or connections still open after the test "
                f"(open_streams <= 1 and open_connections <= 1 expected): {last[0] if last else None}")
    finally:
        ch.close()


@pytest.fixture(autouse=True)
def _shared_server_survives(request):
    """Any test that used the shared server must leave it running."""
    yield
    if "server" in request.fixturenames:
        srv = request.getfixturevalue("server")
        if not srv.alive():
            pytest.fail(f"the shared ubiquityd died during this test (exit "
                        f"{srv.proc.poll()})\n{srv.stderr_tail()}", pytrace=False)


def pytest_runtest_setup(item):
    for srv in _SERVERS:
        _OFFSETS[id(srv)] = srv.stderr_size()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for srv in list(_SERVERS):
            text = srv.stderr_since(_OFFSETS.get(id(srv), 0))
            if text.strip():
                rep.sections.append((f"ubiquityd stderr ({srv.name}, pid "
                                     f"{srv.proc.pid if srv.proc else '?'})", text))


def pytest_report_header(config):
    try:
        binary = ubiq_harness.find_server_binary()
    except RuntimeError as e:
        binary = f"NOT FOUND ({e})"
    return [f"ubiquityd: {binary}", f"generated stubs: {_GEN_DIR}"]
