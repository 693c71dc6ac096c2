"""A CA and certificates made at test time with the openssl CLI (Debian's `openssl`), for the
TLS tests: nothing secret is committed, and every run gets fresh keys."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        pytest.fail("openssl not found: install Debian's openssl (scripts/test does)")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"openssl {' '.join(args)} failed:\n{proc.stderr}"


@dataclass
class CertKey:
    """A PEM certificate and its key (a CA's or a leaf's)."""
    cert: Path
    key: Path

    @property
    def pem(self) -> bytes:
        return self.cert.read_bytes()

    @property
    def key_pem(self) -> bytes:
        return self.key.read_bytes()


def make_ca(directory: Path, name: str) -> CertKey:
    directory.mkdir(parents=True, exist_ok=True)
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    return CertKey(cert, key)


def make_leaf(ca: CertKey, directory: Path, name: str, server: bool) -> CertKey:
    """A certificate signed by `ca`: for a server, valid for localhost and 127.0.0.1."""
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.crt"
    ext = directory / f"{name}.ext"
    usage = "serverAuth" if server else "clientAuth"
    lines = ["basicConstraints=CA:FALSE", f"extendedKeyUsage={usage}"]
    if server:
        lines.append("subjectAltName=DNS:localhost,IP:127.0.0.1")
    ext.write_text("\n".join(lines) + "\n")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}", cwd=directory)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
             "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext), cwd=directory)
    return CertKey(cert, key)
