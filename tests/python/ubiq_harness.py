"""Test harness for the end-to-end suite: stub generation and a real ubiquityd process.

Nothing here fakes the server. `Ubiquityd` starts the real binary on 127.0.0.1 with
`--port 0`, reads the one line it prints (`ubiquityd listening on 127.0.0.1:PORT`),
keeps its stderr in a file, and stops it with SIGTERM, reporting the exit code.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
GRPC_PROTO_DIR = Path(os.environ.get("UBIQ_GRPC_PROTO_DIR", "/usr/share/grpc-proto"))

# Python package under which the grpc-proto files are generated. Their own paths
# (`grpc/...`) would shadow the `grpc` package of grpcio, so they are copied under
# this prefix with their imports rewritten. Proto package names are unchanged, so
# the wire format and the service paths (/grpc.testing.TestService/...) are the same.
GEN_PREFIX = "ubiq_gen"

# grpc-proto files the tests need. Health and reflection v1alpha come from the
# grpcio-health-checking / grpcio-reflection packages instead: generating them again
# would register the same symbols twice in protobuf's default descriptor pool.
GRPC_PROTO_FILES = [
    "grpc/testing/empty.proto",
    "grpc/testing/messages.proto",
    "grpc/testing/test.proto",
    "grpc/reflection/v1/reflection.proto",
]

LISTEN_RE = re.compile(rb"^ubiquityd listening on 127\.0\.0\.1:(\d+)\r?\n$")


def _wkt_include_dir() -> str:
    import grpc_tools

    return str(Path(grpc_tools.__file__).resolve().parent / "_proto")


def generate_stubs(out_dir: Path) -> Path:
    """Generates Python modules for Protos/ and the interop protos into out_dir.

    Returns the directory to put on sys.path.
    """
    src = out_dir / "src"
    py = out_dir / "py"
    src.mkdir(parents=True, exist_ok=True)
    py.mkdir(parents=True, exist_ok=True)

    protos_root = REPO_ROOT / "Protos"
    own = []
    for path in sorted(protos_root.rglob("*.proto")):
        rel = path.relative_to(protos_root).as_posix()
        # Vendored copies of grpc-proto, well-known types and google.rpc are provided
        # by the Python packages already (grpcio-*, protobuf, googleapis-common-protos);
        # generating a `google` package here would also shadow google.protobuf.
        if rel.startswith("grpc/") or rel.startswith("google/"):
            continue
        own.append(rel)
    if not own:
        raise RuntimeError(f"no .proto files found under {protos_root}")

    copied = []
    for rel in GRPC_PROTO_FILES:
        source = GRPC_PROTO_DIR / rel
        if not source.is_file():
            raise RuntimeError(
                f"{source} is missing: install Debian's grpc-proto package (scripts/test does)"
            )
        text = source.read_text()
        text = re.sub(r'^import "grpc/', f'import "{GEN_PREFIX}/grpc/', text, flags=re.M)
        dest = src / GEN_PREFIX / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        copied.append(f"{GEN_PREFIX}/{rel}")

    def protoc(include: Path, files: list[str]) -> None:
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{include}",
            f"-I{_wkt_include_dir()}",
            f"--python_out={py}",
            f"--grpc_python_out={py}",
            *files,
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"protoc failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout}{result.stderr}"
            )

    protoc(protos_root, own)
    protoc(src, copied)
    return py


def find_server_binary() -> Path:
    """The ubiquityd under test: $UBIQUITYD, else the usual SwiftPM output paths."""
    env = os.environ.get("UBIQUITYD")
    candidates = [Path(env)] if env else [
        REPO_ROOT / ".build-pytest" / "debug" / "ubiquityd",
        REPO_ROOT / ".build" / "debug" / "ubiquityd",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c.resolve()  # the server runs with its own working directory
    raise RuntimeError(
        "ubiquityd binary not found (looked at: "
        + ", ".join(str(c) for c in candidates)
        + "). Build it with `swift build` and/or set UBIQUITYD=/path/to/ubiquityd."
    )


def find_load_binary() -> Path:
    """The ubiquity-load under test: $UBIQUITY_LOAD, else next to the ubiquityd under test."""
    env = os.environ.get("UBIQUITY_LOAD")
    path = Path(env) if env else find_server_binary().parent / "ubiquity-load"
    if path.is_file() and os.access(path, os.X_OK):
        return path.resolve()
    raise RuntimeError(
        f"ubiquity-load binary not found at {path}. Build it with `swift build` "
        "(scripts/test does) and/or set UBIQUITY_LOAD=/path/to/ubiquity-load.")


def _pairs(words: list[str]):
    """["--a", "1", "--flag", "--b", "2"] -> ("--a", "1"), ("--flag", None), ("--b", "2")."""
    i = 0
    while i < len(words):
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            yield words[i], words[i + 1]
            i += 2
        else:
            yield words[i], None
            i += 1


def read_rss_bytes(pid: int) -> int:
    """VmRSS of a live process, in bytes, from /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class ServerStartError(RuntimeError):
    pass


# The latest server started on each address ("127.0.0.1:PORT"). conftest's channels (and
# h2raw's data-service requests) add that server's session to every call, so tests need no
# credentials of their own (docs/accounts.md).
_BY_ADDRESS: dict[str, "Ubiquityd"] = {}


def auth_metadata(address: str, channel=None) -> list[tuple[str, str]]:
    """`authorization` for the server at `address`: its default-account session, signed in on
    first use (over `channel` if given, so no extra connection appears); empty for a server run
    with --auth off or not started by this harness."""
    srv = _BY_ADDRESS.get(address)
    token = srv.session(channel) if srv is not None else None
    return [("authorization", f"Bearer {token}")] if token else []


def session_token(address: str) -> str | None:
    """The session of the server at `address` (see `auth_metadata`)."""
    srv = _BY_ADDRESS.get(address)
    return srv.session() if srv is not None else None


class Ubiquityd:
    """One real ubiquityd process on 127.0.0.1 with a fresh data directory."""

    def __init__(self, binary: Path, workdir: Path, name: str = "ubiquityd",
                 args: tuple[str, ...] | list[str] = (), interop: bool = True,
                 log_level: str = "info", port: int = 0):
        self.binary = Path(binary)
        self.workdir = Path(workdir)
        self.name = name
        self.data_dir = self.workdir / f"{name}-data"
        self.stderr_path = self.workdir / f"{name}.stderr.log"
        self.stdout_path = self.workdir / f"{name}.stdout.log"
        self.extra_args = list(args)
        self.interop = interop
        self.log_level = log_level
        self.requested_port = port
        # grpc.ChannelCredentials when the server serves TLS (conftest.channel_for uses them).
        self.credentials = None
        self.proc: subprocess.Popen | None = None
        # Credentials of the default account, made on first use after each start
        # (docs/accounts.md): an API key created with the operator key the server wrote, and a
        # session signed in with it.
        self._api_key: str | None = None
        self._token: str | None = None
        self._auth_lock = threading.Lock()
        self.port: int | None = None
        self.returncode: int | None = None
        self._stdout_thread: threading.Thread | None = None
        self._stderr_file = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def command(self) -> list[str]:
        cmd = [str(self.binary), "--host", "127.0.0.1", "--port", str(self.requested_port),
               "--data-dir", str(self.data_dir), "--log-level", self.log_level,
               # stdin is a pipe this process holds and never writes: when the test run dies,
               # however it dies, the server sees end of file and stops (docs/operations.md).
               "--exit-on-stdin-eof"]
        if self.interop:
            cmd.append("--enable-interop-testing")
        # UBIQ_SERVER_ARGS (e.g. "--event-loops 2") applies to every server of the run,
        # unless a test sets the same flag itself.
        for flag, value in _pairs(os.environ.get("UBIQ_SERVER_ARGS", "").split()):
            if flag not in self.extra_args:
                cmd += [flag] if value is None else [flag, value]
        return cmd + self.extra_args

    def start(self, timeout: float = 30.0) -> "Ubiquityd":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stderr_file = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr_file, cwd=self.workdir, start_new_session=True,
        )
        line = self._read_first_line(timeout)
        m = LISTEN_RE.match(line)
        if not m:
            self.kill()
            raise ServerStartError(
                f"{self.name}: expected first stdout line 'ubiquityd listening on "
                f"127.0.0.1:PORT', got {line!r}\ncommand: {' '.join(self.command)}\n"
                f"stderr:\n{self.stderr_tail()}"
            )
        self.port = int(m.group(1))
        if not (0 < self.port < 65536):
            self.kill()
            raise ServerStartError(f"{self.name}: bad port in {line!r}")
        # Keep draining stdout so the server can never block on a full pipe.
        self._stdout_thread = threading.Thread(target=self._drain_stdout, daemon=True)
        self._stdout_thread.start()
        with self._auth_lock:
            self._api_key = self._token = None
        _BY_ADDRESS[self.address] = self
        return self

    @property
    def auth_on(self) -> bool:
        cmd = self.command
        return not any(a == "--auth" and b == "off" for a, b in zip(cmd, cmd[1:]))

    @property
    def operator_key(self) -> str:
        """The operator key the server wrote to its data directory on first start."""
        return (self.data_dir / "operator.key").read_text().strip()

    def session(self, channel=None) -> str | None:
        """The default account's session token, signing in on first use (CreateApiKey with the
        operator key, then SignIn) over `channel` or, without one, a channel of its own."""
        if not self.auth_on:
            return None
        with self._auth_lock:
            if self._token is None:
                import grpc
                from ubiquity.v1 import accounts_pb2 as ac, accounts_pb2_grpc as acg

                own = channel is None
                ch = (grpc.insecure_channel(self.address) if self.credentials is None else grpc.secure_channel(
                    self.address, self.credentials, options=[("grpc.ssl_target_name_override", "localhost")])) if own else channel
                try:
                    stub = acg.AccountsStub(ch)
                    self._api_key = stub.CreateApiKey(
                        ac.CreateApiKeyRequest(account_id="default", scope=ac.API_KEY_SCOPE_READ_WRITE, label="harness"),
                        metadata=[("authorization", f"Bearer {self.operator_key}")], timeout=30).secret
                    self._token = stub.SignIn(ac.SignInRequest(api_key=self._api_key, device_id=f"harness-{self.name}"),
                                              timeout=30).session_token
                finally:
                    if own:
                        ch.close()
            return self._token

    @property
    def token(self) -> str | None:
        return self.session()

    @property
    def api_key(self) -> str | None:
        self.session()
        return self._api_key

    def _read_first_line(self, timeout: float) -> bytes:
        import selectors

        assert self.proc and self.proc.stdout
        fd = self.proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise ServerStartError(
                        f"{self.name}: no 'listening' line within {timeout}s "
                        f"(stdout so far {buf!r})\nstderr:\n{self.stderr_tail()}")
                if not sel.select(min(remaining, 0.5)):
                    if self.proc.poll() is not None:
                        break
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
        if b"\n" not in buf:
            rc = self.proc.wait(timeout=5)
            raise ServerStartError(
                f"{self.name}: exited with {rc} before printing its address "
                f"(stdout {buf!r})\ncommand: {' '.join(self.command)}\n"
                f"stderr:\n{self.stderr_tail()}")
        first, rest = buf.split(b"\n", 1)
        with open(self.stdout_path, "wb") as f:
            f.write(first + b"\n" + rest)
        return first + b"\n"

    def _drain_stdout(self) -> None:
        assert self.proc and self.proc.stdout
        with open(self.stdout_path, "ab") as f:
            while True:
                chunk = self.proc.stdout.read1(65536) if hasattr(self.proc.stdout, "read1") \
                    else self.proc.stdout.read(65536)
                if not chunk:
                    return
                f.write(chunk)
                f.flush()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Waits for exit; on timeout kills the process and raises AssertionError."""
        assert self.proc is not None
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s after shutdown was requested"
                f"\nstderr tail:\n{self.stderr_tail()}")
        self._close_files()
        return self.returncode

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGTERM) -> int:
        """SIGTERM (graceful drain) and wait for the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None:
            self.returncode = self.proc.returncode
        self._close_files()

    def _close_files(self) -> None:
        if self._stdout_thread is not None:
            self._stdout_thread.join(timeout=5)
            self._stdout_thread = None
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None
        if self.proc is not None and self.proc.stdin is not None and self.proc.poll() is not None:
            self.proc.stdin.close()

    # -- observation -------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def rss_bytes(self) -> int:
        return read_rss_bytes(self.pid)

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def stderr_tail(self, lines: int = 60) -> str:
        text = self.stderr_text().splitlines()
        return "\n".join(text[-lines:])

    def stderr_size(self) -> int:
        try:
            return self.stderr_path.stat().st_size
        except FileNotFoundError:
            return 0

    def stderr_since(self, offset: int, limit: int = 20000) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return ""
        text = data.decode("utf-8", "replace")
        if len(text) > limit:
            text = "…(truncated)…\n" + text[-limit:]
        return text

    def cleanup_data(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)


def wait_until(predicate, timeout: float, interval: float = 0.05, message: str = "condition"):
    """Polls predicate() until it returns a truthy value or timeout passes (bounded)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message} (last: {last!r})")
        time.sleep(interval)


# Memory bounds in tests are for normal builds. Under AddressSanitizer (scripts/sanitize sets
# UBIQ_SANITIZER) every allocation carries redzones and freed memory sits in a 64 MiB
# quarantine, so a server legitimately holds several times more: bounds scale by this.
RSS_FACTOR = 3 if os.environ.get("UBIQ_SANITIZER") == "address" else 1
