"""ubiquityd's configuration: the YAML config file (--config), UBIQUITY_* environment variables,
their precedence (flag > environment > file > default), --check-config, --list-settings, and
that docs/operations.md and deploy/ubiquityd.yaml name every setting."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

import ubiq_harness
from conftest import channel_for
from ubiquity.v1 import admin_pb2, admin_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
META = {"help", "version", "config", "check-config", "list-settings", "restore-from"}


def run(binary, *args, env=None, cwd=None):
    # Only the variables a test gives: an inherited UBIQUITY_* would change what is checked.
    base = {k: v for k, v in os.environ.items() if not k.startswith("UBIQUITY_")}
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60,
                          env={**base, **(env or {})}, cwd=cwd)


def settings(binary) -> list[dict[str, str]]:
    out = run(binary, "--list-settings")
    assert out.returncode == 0, out.stderr
    header, *rows = [line.split("\t") for line in out.stdout.splitlines()]
    return [dict(zip(header, row)) for row in rows]


def check(binary, tmp_path, text=None, *args, env=None):
    extra = list(args)
    if text is not None:
        path = tmp_path / "ubiquityd.yaml"
        path.write_text(text)
        extra = ["--config", str(path), *extra]
    return run(binary, "--check-config", *extra, env=env, cwd=tmp_path)


def test_every_flag_has_a_key_and_an_environment_variable(server_binary):
    table = settings(server_binary)
    keys = {s["key"] for s in table}
    help_text = run(server_binary, "--help").stdout
    flags = set(re.findall(r"^\s+--([a-z0-9-]+)", help_text, re.M)) - META
    assert flags == keys, f"flags without a key: {flags - keys}; keys without a flag: {keys - flags}"
    for s in table:
        assert s["environment"] == "UBIQUITY_" + s["key"].upper().replace("-", "_")
    assert {s["group"] for s in table} == {"Server", "Tuning and limits"}


def test_help_shows_the_essential_flags_apart_from_the_tuning_ones(server_binary):
    help_text = run(server_binary, "--help").stdout
    sections = {}
    current = None
    for line in help_text.splitlines():
        if re.match(r"^[A-Z][A-Z ]+:", line):
            current = line.rstrip(":")
        m = re.match(r"^\s+--([a-z0-9-]+)", line)
        if m and current:
            sections[m.group(1)] = current
    for s in settings(server_binary):
        assert sections[s["key"]] == s["group"].upper(), s
    assert sections["host"] == "SERVER" and sections["writer-nice"] == "TUNING AND LIMITS"
    assert help_text.index("SERVER:") < help_text.index("TUNING AND LIMITS:")


def test_operations_doc_lists_every_key(server_binary):
    doc = (ROOT / "docs/operations.md").read_text()
    missing = [s["key"] for s in settings(server_binary) if f"`--{s['key']}`" not in doc]
    assert not missing, f"docs/operations.md does not list: {missing}"


def test_the_example_config_is_accepted_and_names_every_key(server_binary, tmp_path):
    example = ROOT / "deploy/ubiquityd.yaml"
    out = run(server_binary, "--check-config", "--config", str(example), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("configuration OK")
    text = example.read_text()
    missing = [s["key"] for s in settings(server_binary)
               if not re.search(rf"^#?\s*{re.escape(s['key'])}:", text, re.M)]
    assert not missing, f"deploy/ubiquityd.yaml does not mention: {missing}"


def test_file_values_are_used_and_reported_with_their_line(server_binary, tmp_path):
    out = check(server_binary, tmp_path, "# comment\nmax-open-stores: 9\nsynchronous: normal\n")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^max-open-stores: 9 +\(.*ubiquityd.yaml:2\)$", out.stdout, re.M), out.stdout
    assert re.search(r"^synchronous: normal +\(.*ubiquityd.yaml:3\)$", out.stdout, re.M), out.stdout


def test_precedence_flag_over_environment_over_file(server_binary, tmp_path):
    text = "max-open-stores: 9\nmax-connections: 50\nwriter-nice: 3\n"
    out = check(server_binary, tmp_path, text, "--writer-nice", "5",
                env={"UBIQUITY_MAX_CONNECTIONS": "60", "UBIQUITY_WRITER_NICE": "4"})
    assert out.returncode == 0, out.stderr
    assert re.search(r"^max-open-stores: 9 +\(.*:1\)$", out.stdout, re.M), out.stdout
    assert "max-connections: 60  (environment UBIQUITY_MAX_CONNECTIONS)" in out.stdout
    assert "writer-nice: from the command line" in out.stdout


def test_the_config_path_may_come_from_the_environment(server_binary, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("kv-max-keys: 7\n")
    out = run(server_binary, "--check-config", env={"UBIQUITY_CONFIG": str(path)}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "kv-max-keys: 7" in out.stdout


@pytest.mark.parametrize("text,expected", [
    ("max-open-stores: 4\nmax_connections: 3\n", r"ubiquityd.yaml:2: unknown key 'max_connections' \(did you mean 'max-connections'\?\)"),
    ("no-such-setting: 1\n", r"ubiquityd.yaml:1: unknown key 'no-such-setting'"),
    ("port: 70000\n", r"--port must be 0...65535 \('port' = '70000' from .*ubiquityd.yaml:1\)"),
    ("\n\nmax-open-stores: many\n", r"'many' is invalid for '--max-open-stores.*'max-open-stores' = 'many' from .*ubiquityd.yaml:3"),
    ("allow-plaintext: maybe\n", r"ubiquityd.yaml:1: 'allow-plaintext' must be true or false, not 'maybe'"),
    ("port: [1, 2]\n", r"ubiquityd.yaml:1: key 'port' needs a single value"),
    ("port: 1\nport: 2\n", r"ubiquityd.yaml: not valid YAML: .*duplicated key.*'port'"),
    ("port:\n", r"ubiquityd.yaml:1: key 'port' has no value"),
    ("- port\n", r"must be a mapping"),
    ("port: 'x\n", r"not valid YAML"),
    ("host: 0.0.0.0\n", r"--host 0.0.0.0 is not a loopback address.*'host' = '0.0.0.0' from"),
    ("writer-threads: 0\n", r"--writer-threads must be 1...64 \('writer-threads' = '0' from .*ubiquityd.yaml:1\)"),
    ("writer-threads: 65\n", r"--writer-threads must be 1...64 \('writer-threads' = '65' from .*ubiquityd.yaml:1\)"),
])
def test_bad_files_are_refused_naming_the_key(server_binary, tmp_path, text, expected):
    out = check(server_binary, tmp_path, text)
    assert out.returncode != 0
    assert re.search(expected, out.stderr, re.S), out.stderr
    assert out.stdout == ""


def test_bad_environment_values_are_refused_naming_the_variable(server_binary, tmp_path):
    # A variable that names no setting is reported, not refused: other tools share the prefix
    # (scripts/test exports UBIQUITY_LOAD to every server).
    out = check(server_binary, tmp_path, None, env={"UBIQUITY_MAX_OPEN_STORE": "3"})
    assert out.returncode == 0, out.stderr
    assert "note: environment variable UBIQUITY_MAX_OPEN_STORE is not a ubiquityd setting; ignored" in out.stdout
    assert "max-open-stores" not in out.stdout
    out = check(server_binary, tmp_path, None, env={"UBIQUITY_WRITER_NICE": "25"})
    assert out.returncode != 0
    assert "--writer-nice must be 0...19 ('writer-nice' = '25' from environment UBIQUITY_WRITER_NICE)" in out.stderr


def test_a_missing_config_file_is_an_error(server_binary, tmp_path):
    out = run(server_binary, "--check-config", "--config", str(tmp_path / "nope.yaml"))
    assert out.returncode != 0 and "cannot read config file" in out.stderr and "nope.yaml" in out.stderr


def test_check_config_loads_the_tls_files(server_binary, tmp_path):
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    out = check(server_binary, tmp_path, f"tls-cert: {tmp_path}/cert.pem\ntls-key: {tmp_path}/cert.pem\n")
    assert out.returncode != 0 and "cannot load" in out.stderr, out.stderr


def test_the_server_runs_with_file_and_environment_settings(start_server, tmp_path, monkeypatch):
    # The harness gives --host/--port/--data-dir on the command line; these come from the file
    # and the environment, and the running server reports them (GetServerInfo).
    path = tmp_path / "server.yaml"
    path.write_text("max-connections: 77\nmax-concurrent-streams: 33\nmax-header-list-bytes: 20000\n")
    for name in [k for k in os.environ if k.startswith("UBIQUITY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("UBIQUITY_MAX_CONCURRENT_STREAMS", "44")
    srv = start_server(args=["--config", str(path), "--max-header-list-bytes", "30000"], name="configured")
    ch = channel_for(srv)
    try:
        info = admin_pb2_grpc.AdminStub(ch).GetServerInfo(admin_pb2.GetServerInfoRequest(), timeout=30)
    finally:
        ch.close()
    assert info.limits.max_connections == 77          # file
    assert info.limits.max_concurrent_streams == 44   # environment over file
    assert info.limits.max_header_list_bytes == 30000  # flag over file


def test_an_empty_environment_variable_counts_as_unset(server_binary, tmp_path):
    out = check(server_binary, tmp_path, "max-open-stores: 9\n", env={"UBIQUITY_MAX_OPEN_STORES": ""})
    assert out.returncode == 0, out.stderr
    assert re.search(r"^max-open-stores: 9 +\(.*ubiquityd.yaml:1\)$", out.stdout, re.M), out.stdout


def test_an_empty_config_variable_reads_no_file(server_binary, tmp_path):
    out = run(server_binary, "--check-config", env={"UBIQUITY_CONFIG": ""}, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "configuration OK", out
