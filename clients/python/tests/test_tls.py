"""Both clients over TLS to a real ubiquityd, with a CA and certificates made at test time
(tests/python/tls_material.py): trusting the CA, presenting a client certificate when the server
requires one, and refusing a server whose certificate another CA signed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

import tls_material
import ubiq_harness
import ubiquity
import ubiquity.aio
from conftest import person_model


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tls_material.CertKey]:
    d = tmp_path_factory.mktemp("pki")
    ca, other = tls_material.make_ca(d, "client-test-ca"), tls_material.make_ca(d, "other-ca")
    return {"ca": ca, "other_ca": other,
            "server": tls_material.make_leaf(ca, d, "server", server=True),
            "client": tls_material.make_leaf(ca, d, "client", server=False)}


def _start(tmp_path: Path, pki: dict[str, tls_material.CertKey], client_ca: bool) -> ubiq_harness.Ubiquityd:
    args = ["--tls-cert", str(pki["server"].cert), "--tls-key", str(pki["server"].key)]
    if client_ca:
        args += ["--tls-client-ca", str(pki["ca"].cert)]
    d = ubiq_harness.Ubiquityd(ubiq_harness.find_server_binary(), tmp_path, interop=False, args=args)
    # the harness makes the API key over TLS too
    c = pki["client"]
    d.credentials = grpc.ssl_channel_credentials(pki["ca"].pem, c.key_pem if client_ca else None,
                                                 c.pem if client_ca else None)
    return d.start()


@pytest.fixture
def tls_server(tmp_path: Path, pki: dict[str, tls_material.CertKey]) -> Iterator[ubiq_harness.Ubiquityd]:
    d = _start(tmp_path, pki, client_ca=False)
    yield d
    d.kill() if d.alive() else None


@pytest.fixture
def mtls_server(tmp_path: Path, pki: dict[str, tls_material.CertKey]) -> Iterator[ubiq_harness.Ubiquityd]:
    d = _start(tmp_path, pki, client_ca=True)
    yield d
    d.kill() if d.alive() else None


def _save_and_read(client: ubiquity.Client) -> None:
    store = client.open_store(f"tls-{uuid.uuid4()}")
    store.register_model(person_model())
    ann = store.save(inserts={"a": ("Person", {"name": "Ann"})}).permanent_ids["a"]
    assert store.get([ann])[ann]["name"] == "Ann"


def test_sync_client_trusts_the_ca_given_as_a_path(tls_server: ubiq_harness.Ubiquityd,
                                                   pki: dict[str, tls_material.CertKey]) -> None:
    with ubiquity.Client(tls_server.address, tls=ubiquity.TLS(ca=str(pki["ca"].cert)),
                         api_key=tls_server.api_key) as client:
        _save_and_read(client)


def test_a_server_signed_by_another_ca_is_refused(tls_server: ubiq_harness.Ubiquityd,
                                                  pki: dict[str, tls_material.CertKey]) -> None:
    with ubiquity.Client(tls_server.address, tls=ubiquity.TLS(ca=pki["other_ca"].pem), timeout=5,
                         api_key=tls_server.api_key) as client:
        with pytest.raises(ubiquity.UnavailableError):
            client.list_stores()


def test_plaintext_client_cannot_talk_to_the_tls_port(tls_server: ubiq_harness.Ubiquityd) -> None:
    with ubiquity.Client(tls_server.address, timeout=5, api_key="unused") as client:
        with pytest.raises(ubiquity.UnavailableError):
            client.list_stores()


def test_client_certificate_when_the_server_requires_one(mtls_server: ubiq_harness.Ubiquityd,
                                                         pki: dict[str, tls_material.CertKey]) -> None:
    c = pki["client"]
    tls = ubiquity.TLS(ca=pki["ca"].pem, cert=c.cert, key=c.key)
    with ubiquity.Client(mtls_server.address, tls=tls, api_key=mtls_server.api_key) as client:
        _save_and_read(client)
    with ubiquity.Client(mtls_server.address, tls=ubiquity.TLS(ca=pki["ca"].pem), timeout=5,
                         api_key=mtls_server.api_key) as anonymous:
        with pytest.raises(ubiquity.UnavailableError):
            anonymous.list_stores()
    with pytest.raises(ValueError):
        ubiquity.TLS(ca=pki["ca"].pem, cert=c.cert).credentials()


def test_aio_client_over_mutual_tls_with_a_feed(mtls_server: ubiq_harness.Ubiquityd,
                                                pki: dict[str, tls_material.CertKey]) -> None:
    c = pki["client"]

    async def scenario() -> None:
        async with ubiquity.aio.Client(mtls_server.address, tls=ubiquity.TLS(ca=pki["ca"].pem, cert=c.pem, key=c.key_pem),
                                       api_key=mtls_server.api_key) as client:
            store = await client.open_store("tls-aio")
            await store.register_model(person_model())
            feed = await store.changes()
            txs = feed.transactions()
            r = await store.save(inserts={"a": ("Person", {"name": "Ann"})})
            assert (await txs.__anext__()).generation == r.generation
            feed.close()

    asyncio.run(scenario())
