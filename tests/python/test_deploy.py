"""deploy/: the manifests and build steps checked by the real tools on this machine.

- `ubiq health` (the container HEALTHCHECK and the Kubernetes probes) against real servers;
- deploy/kubernetes validated by kubernetes-validate (--strict, a pinned Kubernetes version);
- deploy/container/build-rootfs.sh run against the binaries under test, and the resulting
  filesystem's ubiquityd started with TLS and probed by its own healthcheck;
- deploy/systemd: `systemd-analyze verify`, and its `security` exposure score kept at the
  value deploy/README.md states.
About 15 s (build-rootfs.sh copies the debug binaries: ~10 s of it)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import yaml

import tls_material
import ubiq_harness

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.33.0"  # the pinned API version the manifests are validated against
SECURITY_EXPOSURE_MAX = 1.5    # deploy/README.md states the score (1.2 when written)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UBIQUITY_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def ubiq_binary(server_binary) -> Path:
    path = server_binary.parent / "ubiq"
    assert path.is_file(), f"ubiq not built next to {server_binary}"
    return path


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("deploy-tls")
    ca = tls_material.make_ca(d, "deploy-ca")
    return ca, tls_material.make_leaf(ca, d, "server", server=True)


def health(ubiq_binary, *args, env=None):
    return subprocess.run([str(ubiq_binary), "health", *args], capture_output=True, text=True, timeout=60,
                          env=env or clean_env())


def test_ubiq_health_reports_serving(ubiq_binary, server):
    out = health(ubiq_binary, "--server", server.address)
    assert out.returncode == 0 and out.stdout.strip() == "SERVING", out


def test_ubiq_health_over_tls(ubiq_binary, start_server, tls):
    ca, leaf = tls
    srv = start_server(args=["--tls-cert", str(leaf.cert), "--tls-key", str(leaf.key)], name="health-tls",
                       credentials=grpc.ssl_channel_credentials(root_certificates=ca.pem))
    out = health(ubiq_binary, "--server", srv.address, "--tls-ca", str(ca.cert))
    assert out.returncode == 0 and out.stdout.strip() == "SERVING", out
    # Plaintext against the TLS port is not a healthy answer.
    out = health(ubiq_binary, "--server", srv.address, "--timeout", "3")
    assert out.returncode == 2, out


def test_ubiq_health_fails_when_nothing_listens(ubiq_binary, start_server):
    srv = start_server(name="health-gone")
    address = srv.address
    assert srv.stop() == 0
    out = health(ubiq_binary, "--server", address, "--timeout", "3")
    assert out.returncode == 2 and "cannot ask" in out.stderr, out


def kubernetes_validate() -> str:
    found = os.environ.get("KUBERNETES_VALIDATE") or shutil.which(
        "kubernetes-validate", path=str(Path(sys.executable).parent)) or shutil.which("kubernetes-validate")
    assert found, "kubernetes-validate is not installed (tests/python/requirements.txt; scripts/test installs it)"
    return found


def test_kubernetes_manifests_validate(tmp_path):
    manifests = sorted((ROOT / "deploy/kubernetes").glob("*.yaml"))
    kinds = {yaml.safe_load(m.read_text())["kind"] for m in manifests}
    assert kinds == {"ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"}
    out = subprocess.run([kubernetes_validate(), "--strict", "-k", KUBERNETES_VERSION, *map(str, manifests)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    # The validator is strict: a misspelt field fails (so passing means something).
    broken = tmp_path / "broken.yaml"
    broken.write_text((ROOT / "deploy/kubernetes/statefulset.yaml").read_text().replace("readinessProbe:", "readinesProbe:"))
    out = subprocess.run([kubernetes_validate(), "--strict", "-k", KUBERNETES_VERSION, str(broken)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "readinesProbe" in out.stdout + out.stderr


def test_kubernetes_probes_use_ubiq_health_over_tls():
    sts = yaml.safe_load((ROOT / "deploy/kubernetes/statefulset.yaml").read_text())
    container = sts["spec"]["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        cmd = container[probe]["exec"]["command"]
        assert cmd[:2] == ["/usr/local/bin/ubiq", "health"] and "--tls-ca" in cmd
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["tls"] == "/etc/ubiquity/tls" and mounts["data"] == "/var/lib/ubiquity"


def test_the_kubernetes_config_is_valid(server_binary, tmp_path, tls):
    _, leaf = tls
    cm = yaml.safe_load((ROOT / "deploy/kubernetes/configmap.yaml").read_text())
    path = tmp_path / "ubiquityd.yaml"
    path.write_text(cm["data"]["ubiquityd.yaml"])
    # The file names the Secret's mount paths; the test's certificate stands in for them.
    out = subprocess.run([str(server_binary), "--check-config", "--config", str(path)], capture_output=True, text=True,
                         timeout=60, env=clean_env(UBIQUITY_TLS_CERT=str(leaf.cert), UBIQUITY_TLS_KEY=str(leaf.key)))
    assert out.returncode == 0, out.stderr
    assert "host: 0.0.0.0" in out.stdout


def test_container_rootfs_builds_and_serves(server_binary, tmp_path, tls):
    ca, leaf = tls
    rootfs = tmp_path / "rootfs"
    out = subprocess.run([str(ROOT / "deploy/container/build-rootfs.sh"), "--from-build", str(server_binary.parent), str(rootfs)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    packages = (rootfs / "usr/share/ubiquity/runtime-packages").read_text().split()
    assert {"libuv1", "libnghttp2-14", "libsqlite3-0", "libssl3"} <= set(packages), packages
    assert "10001" in (rootfs / "usr/share/ubiquity/passwd.d").read_text()
    # Every ENV and the HEALTHCHECK of the Containerfile point at what the script installed.
    containerfile = (ROOT / "deploy/container/Containerfile").read_text()
    assert "RUN deploy/container/build-rootfs.sh /rootfs" in containerfile
    for path in re.findall(r"(/(?:usr|etc)/[\w/.-]+)", containerfile):
        if path.startswith(("/etc/ubiquity/tls/", "/usr/share/ubiquity/passwd.d", "/etc/passwd", "/etc/group")) or "/tmp" in path:
            continue
        assert (rootfs / path.lstrip("/")).exists(), f"Containerfile names {path}, not in the rootfs"

    # Start the rootfs's server as the image does (config from UBIQUITY_CONFIG, TLS from ENV),
    # on loopback and a free port here, and probe it with the image's healthcheck.
    data = tmp_path / "data"
    env = clean_env(LD_LIBRARY_PATH=str(rootfs / "usr/local/lib/ubiquity"),
                    UBIQUITY_CONFIG=str(rootfs / "etc/ubiquity/ubiquityd.yaml"),
                    UBIQUITY_TLS_CERT=str(leaf.cert), UBIQUITY_TLS_KEY=str(leaf.key),
                    UBIQUITY_HOST="127.0.0.1", UBIQUITY_PORT="0", UBIQUITY_DATA_DIR=str(data))
    proc = subprocess.Popen([str(rootfs / "usr/local/bin/ubiquityd")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    try:
        line = proc.stdout.readline().decode()
        m = re.match(r"ubiquityd listening on 127\.0\.0\.1:(\d+)", line)
        assert m, (line, proc.stderr.read(4000) if proc.poll() is not None else "")
        probe = subprocess.run([str(rootfs / "usr/local/bin/ubiq-healthcheck")], capture_output=True, text=True, timeout=60,
                               env={**env, "UBIQUITY_PORT": m.group(1), "UBIQ_HEALTH_CA": str(ca.cert)})
        assert probe.returncode == 0 and probe.stdout.strip() == "SERVING", probe
        assert (data / "ubiquity.lock").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0


def installed_unit(tmp_path: Path, server_binary: Path) -> Path:
    unit = tmp_path / "ubiquityd.service"
    unit.write_text((ROOT / "deploy/systemd/ubiquityd.service").read_text().replace("/usr/local/bin/ubiquityd", str(server_binary)))
    return unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd on this machine (the unit is checked where it is)")
def test_systemd_unit_verifies_and_keeps_its_security_score(server_binary, tmp_path):
    unit = installed_unit(tmp_path, server_binary)
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr
    out = subprocess.run(["systemd-analyze", "security", "--offline=true", str(unit)], capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for ubiquityd.service: ([\d.]+)", out.stdout)
    assert m, out.stdout + out.stderr
    assert float(m.group(1)) <= SECURITY_EXPOSURE_MAX, out.stdout
    readme = (ROOT / "deploy/README.md").read_text()
    assert f"exposure {m.group(1)}" in readme, f"deploy/README.md should state the score {m.group(1)}"


def test_systemd_unit_runs_the_example_config(server_binary, tmp_path):
    unit = (ROOT / "deploy/systemd/ubiquityd.service").read_text()
    assert "--config /etc/ubiquity/ubiquityd.yaml" in unit
    assert "ExecStartPre=/usr/local/bin/ubiquityd --check-config --config /etc/ubiquity/ubiquityd.yaml" in unit
