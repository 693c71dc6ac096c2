"""Fixtures: a real ubiquityd on 127.0.0.1 (started by the repository's test harness) and a client.

The package under test is the installed one (`pip install ./clients/python`), not the source tree,
so these tests also prove the install works.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "python"))

import ubiq_harness  # noqa: E402

import ubiquity  # noqa: E402
from ubiquity.v1 import models_pb2 as md  # noqa: E402


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ubiq_harness.Ubiquityd]:
    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, interop=False).start()
    try:
        yield d
    finally:
        d.kill() if d.alive() else None


@pytest.fixture
def client(server: ubiq_harness.Ubiquityd) -> Iterator[ubiquity.Client]:
    with ubiquity.Client(server.address, timeout=30, api_key=server.api_key, device_id="pytest") as c:
        yield c


def person_model() -> md.Model:
    """Person (name required, email unique)."""
    A = md.Attribute
    person = md.Entity(name="Person", attributes=[
        A(name="name", type=md.ATTRIBUTE_TYPE_STRING, required=True),
        A(name="age", type=md.ATTRIBUTE_TYPE_INT32),
        A(name="email", type=md.ATTRIBUTE_TYPE_STRING),
        A(name="score", type=md.ATTRIBUTE_TYPE_DOUBLE),
    ], uniqueness_constraints=[md.PropertyList(properties=["email"])])
    return md.Model(version_identifier="v1", entities=[person])


@pytest.fixture
def store(client: ubiquity.Client) -> ubiquity.Store:
    s = client.open_store(f"people-{uuid.uuid4()}")
    s.register_model(person_model())
    return s
