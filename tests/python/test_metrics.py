"""Prometheus metrics and health (issue 21): `--metrics-address` serves GET /metrics and
/healthz over HTTP/1.1. Checked with the real tools: Debian's `prometheus` scrapes a running
ubiquityd and a metric is read back through its HTTP API; `promtool check metrics` accepts the
exposition; `promtool check rules` accepts deploy/prometheus/alerts.yml. Plus what a call does
to the exposition, and what bad HTTP does to the server (4xx, and it keeps serving)."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import grpc
import pytest

from conftest import make_channel, ping_ok
from ubiq_client import Client, error_of, person_model
from ubiq_harness import wait_until
from ubiquity.v1 import admin_pb2, admin_pb2_grpc, stores_pb2 as st

ROOT = Path(__file__).resolve().parents[2]
METRICS_RE = re.compile(r"ubiquityd metrics on http://127\.0\.0\.1:(\d+)/metrics")
REQUEST_TIMEOUT_MS = 300


def need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        pytest.fail(f"{tool} is not installed (Debian package prometheus; scripts/test installs it)", pytrace=False)
    return path


def start_with_metrics(start_server, request_timeout_ms: int = REQUEST_TIMEOUT_MS):
    srv = start_server(args=["--metrics-address", "127.0.0.1:0",
                             "--metrics-request-timeout-ms", str(request_timeout_ms)])
    m = wait_until(lambda: METRICS_RE.search(srv.stdout_path.read_text()), 15,
                   message="the 'metrics on' line")
    srv.metrics_port = int(m.group(1))
    return srv


@pytest.fixture
def metrics_server(start_server):
    return start_with_metrics(start_server)


def get(port: int, path: str = "/metrics", method: str = "GET") -> tuple[int, dict, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        conn.close()


def scrape(port: int) -> str:
    status, headers, body = get(port)
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return body


def sample(text: str, name: str, **labels) -> float | None:
    """The value of the series `name{labels}` (labels matched exactly, in any order)."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if got == {k: str(v) for k, v in labels.items()}:
            return float(m.group(3))
    return None


PING = dict(grpc_service="ubiquity.v1.Admin", grpc_method="Ping", grpc_type="unary")


def test_a_call_counts_under_its_method_and_code(metrics_server):
    port = metrics_server.metrics_port
    before = scrape(port)
    # Every code of a registered method is there from the start (rates see the first error).
    assert sample(before, "grpc_server_handled_total", **PING, grpc_code="OK") == 0
    assert sample(before, "grpc_server_handled_total", **PING, grpc_code="INTERNAL") == 0
    ch = make_channel(metrics_server.address)
    try:
        admin = admin_pb2_grpc.AdminStub(ch)
        for _ in range(3):
            admin.Ping(admin_pb2.PingRequest(payload=b"x"), timeout=10)
        client = Client(ch)
        with pytest.raises(grpc.RpcError) as e:
            client.stores.OpenStore(st.OpenStoreRequest(name="missing-store", must_exist=True), timeout=10)
        assert error_of(e.value)[0] == grpc.StatusCode.NOT_FOUND
        sid = client.open(model=person_model())
        client.insert_people(sid, [{"name": "Ada"}, {"name": "Grace"}])
        after = scrape(port)
    finally:
        ch.close()
    assert sample(after, "grpc_server_handled_total", **PING, grpc_code="OK") == 3
    assert sample(after, "grpc_server_handling_seconds_count", **PING) == 3
    assert sample(after, "grpc_server_handling_seconds_bucket", **PING, le="+Inf") == 3
    assert sample(after, "grpc_server_handling_seconds_sum", **PING) > 0
    open_store = dict(grpc_service="ubiquity.v1.Stores", grpc_method="OpenStore", grpc_type="unary")
    assert sample(after, "grpc_server_handled_total", **open_store, grpc_code="NOT_FOUND") == 1
    assert sample(after, "grpc_server_handled_total", **open_store, grpc_code="OK") == 1
    # The save went through a store's writer: one group commit of one save at least.
    assert sample(after, "ubiquity_store_commit_seconds_count") >= 1
    assert sample(after, "ubiquity_store_group_commit_saves_count") >= 1
    assert sample(after, "ubiquity_stores_open") >= 1
    assert sample(after, "ubiquity_stores_max_open") == 256
    # This scrape's own connection is not gRPC; the channel above was open during it.
    assert sample(after, "ubiquity_grpc_connections_accepted_total") >= 1
    assert sample(after, "process_resident_memory_bytes") > 1 << 20
    assert sample(after, "process_open_fds") > 3


def test_store_opens_and_closes_are_timed(start_server):
    """With room for one open store, switching between two stores opens a closed store each
    time and closes the other: both appear in their histograms."""
    srv = start_server(args=["--metrics-address", "127.0.0.1:0", "--max-open-stores", "1"])
    m = wait_until(lambda: METRICS_RE.search(srv.stdout_path.read_text()), 15, message="the 'metrics on' line")
    port = int(m.group(1))
    ch = make_channel(srv.address)
    try:
        client = Client(ch)
        a = client.open(name="first", model=person_model())
        b = client.open(name="second", model=person_model())
        before = scrape(port)
        for sid in (a, b, a, b):
            assert len(client.fetch(sid, "Person").objects) == 0
    finally:
        ch.close()
    opened = sample(before, "ubiquity_store_open_seconds_count")
    assert opened is not None and opened >= 2, "each new store was opened"

    def all_closed() -> str | None:
        text = scrape(port)
        return text if (sample(text, "ubiquity_store_close_seconds_count") or 0) >= opened + 3 else None

    after = wait_until(all_closed, 15, message="the evicted stores' closes")
    # a, b, a, b: each fetch found its store closed (the other one was evicted to make room)
    assert sample(after, "ubiquity_store_open_seconds_count") == opened + 4
    assert sample(after, "ubiquity_store_open_seconds_bucket", le="+Inf") == opened + 4
    assert sample(after, "ubiquity_store_open_seconds_sum") > 0
    assert sample(after, "ubiquity_store_evictions_total") >= 4


def test_promtool_accepts_the_exposition(metrics_server, tmp_path):
    promtool = need("promtool")
    ping_ok(metrics_server.address)
    text = scrape(metrics_server.metrics_port)
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"promtool check metrics:\n{r.stdout}{r.stderr}"
    # Every family has HELP and TYPE (promtool only lints what it sees).
    families = {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)}
    helped = {m.group(1) for m in re.finditer(r"^# HELP (\S+) ", text, re.M)}
    assert families == helped and "grpc_server_handled_total" in families


def test_alert_rules_and_example_config_pass_promtool():
    promtool = need("promtool")
    rules = ROOT / "deploy" / "prometheus" / "alerts.yml"
    r = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"promtool check rules:\n{r.stdout}{r.stderr}"
    assert "SUCCESS" in r.stdout
    config = ROOT / "deploy" / "prometheus" / "prometheus.yml"
    r = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"promtool check config:\n{r.stdout}{r.stderr}"
    # The rules fire on the series that should fire them (and stay quiet otherwise).
    tests = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
    r = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"promtool test rules:\n{r.stdout}{r.stderr}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_scrapes_ubiquityd(metrics_server, tmp_path):
    """The real thing: Debian's prometheus scrapes the endpoint; the Ping count is read back
    through its HTTP API (/api/v1/query)."""
    prometheus = need("prometheus")
    ch = make_channel(metrics_server.address)
    try:
        admin = admin_pb2_grpc.AdminStub(ch)
        for _ in range(5):
            admin.Ping(admin_pb2.PingRequest(payload=b"p"), timeout=10)
    finally:
        ch.close()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: ubiquityd\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_server.metrics_port}']\n")
    web = free_port()
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    try:
        def query(q: str):
            url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body = json.load(r)
            except OSError:
                return None  # not up yet
            assert body["status"] == "success", body
            return body["data"]["result"]

        q = 'grpc_server_handled_total{job="ubiquityd",grpc_method="Ping",grpc_code="OK"}'
        result = wait_until(lambda: query(q), 60, interval=0.25, message=f"prometheus to have {q}")
        assert float(result[0]["value"][1]) == 5
        up = wait_until(lambda: query('up{job="ubiquityd"}'), 30, interval=0.25, message="up")
        assert float(up[0]["value"][1]) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def raw(port: int, data: bytes, read_timeout: float = 10, reset_ok: bool = False) -> bytes:
    """Sends `data` on a fresh connection and reads until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                # Only where the server closes without reading (over its connection limit);
                # everywhere else it closes gracefully, so the client reads its answer.
                if reset_ok:
                    return out
                raise
            if not chunk:
                return out
            out += chunk


def status_of(response: bytes) -> int:
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    assert m, response[:200]
    return int(m.group(1))


def test_health_endpoint(metrics_server):
    status, _, body = get(metrics_server.metrics_port, "/healthz")
    assert (status, body) == (200, "ok\n")


def test_bad_http_gets_4xx_and_the_server_keeps_serving(metrics_server):
    port = metrics_server.metrics_port
    assert get(port, "/nope")[0] == 404
    assert get(port, "/metrics", method="POST")[0] == 405
    assert get(port, "/metrics", method="DELETE")[0] == 405
    assert status_of(raw(port, b"this is not http\r\n\r\n")) == 400
    # A gRPC client pointed at the metrics port by mistake.
    assert status_of(raw(port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")) == 400
    huge = b"GET /metrics HTTP/1.1\r\nX-Filler: " + b"a" * 20000 + b"\r\n\r\n"
    assert status_of(raw(port, huge)) == 431
    # A slow client: half a request, then nothing; the server answers 408 and closes.
    assert status_of(raw(port, b"GET /metr")) == 408
    # Keep-alive: several requests on one connection, then the server still serves others.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(3):
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b"ok\n"
    conn.close()
    assert "grpc_server_handled_total" in scrape(port)
    ping_ok(metrics_server.address)


def test_connection_limit_bounds_the_endpoint(start_server):
    """More than 16 idle connections: the extra ones are closed at once, and once the idle
    ones time out the endpoint serves again."""
    # A request timeout well past the time the 17th connection takes to arrive.
    metrics_server = start_with_metrics(start_server, request_timeout_ms=5000)
    port = metrics_server.metrics_port
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(16)]
    try:
        # The 17th is accepted by the kernel, then closed by the server without an answer.
        assert raw(port, b"GET /healthz HTTP/1.1\r\n\r\n", reset_ok=True) == b""
    finally:
        # The held ones get 408 when their request timeout passes.
        for s in held:
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            assert status_of(data) == 408
            s.close()

    def healthz_answers():
        try:
            return get(port, "/healthz")[0] == 200
        except ConnectionError:
            return False  # the server has not seen all 16 closes yet: still at its limit

    wait_until(healthz_answers, 15, message="a slot freed by the timed-out connections")
    ping_ok(metrics_server.address)
