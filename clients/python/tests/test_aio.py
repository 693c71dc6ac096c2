"""The asyncio client against a real ubiquityd: save, fetch at a token, typed errors, feed resume."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

import ubiq_harness
import ubiquity
import ubiquity.aio
from conftest import person_model


def test_aio_save_fetch_get_and_typed_errors(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key) as client:
            store = await client.open_store(f"aio-{uuid.uuid4()}")
            await store.register_model(person_model())
            r = await store.save(inserts={"a": ("Person", {"name": "Ann", "age": 30})})
            ann = r.permanent_ids["a"]
            before = r.token
            await store.save(updates={ann: {"age": 31}}, expected_versions={ann: 1})
            assert [o["age"] for o in await store.fetch("Person", "age > $n", {"n": 20})] == [31]
            assert (await store.get([ann], at=before))[ann]["age"] == 30
            again = await store.save(updates={ann: {"age": 99}}, client_transaction_id="t1")
            replay = await store.save(updates={ann: {"age": 99}}, client_transaction_id="t1")
            assert replay.replayed and replay.generation == again.generation
            with pytest.raises(ubiquity.ConflictError) as e:
                await store.save(updates={ann: {"age": 1}}, expected_versions={ann: 1})
            assert e.value.reason == "MERGE_CONFLICT" and e.value.conflicts[0].store_version == 3
            with pytest.raises(ubiquity.InvalidArgumentError) as f:
                await store.fetch("Person", "age >")
            assert f.value.reason == "PREDICATE_SYNTAX"
            assert store.name in [s.name for s in await client.list_stores()]

    asyncio.run(scenario())


def test_aio_feed_resumes_after_a_server_restart(tmp_path: Path) -> None:
    binary = ubiq_harness.find_server_binary()
    servers = [ubiq_harness.Ubiquityd(binary, tmp_path, name="aio", interop=False).start()]

    async def scenario() -> None:
        async with ubiquity.aio.Client(servers[0].address, api_key=servers[0].api_key) as client:
            store = await client.open_store("feed")
            await store.register_model(person_model())
            feed = await store.changes()
            txs = feed.transactions()
            first = await store.save(inserts={"a": ("Person", {"name": "Ann"})})
            assert (await txs.__anext__()).generation == first.generation
            port = servers[0].port or 0
            assert servers[0].stop() == 0
            servers.append(ubiq_harness.Ubiquityd(binary, tmp_path, name="aio", interop=False, port=port).start())
            second = await store.save(inserts={"b": ("Person", {"name": "Bob"})})
            t = await txs.__anext__()
            assert t.generation == second.generation == first.generation + 1
            assert feed.reconnects >= 1
            feed.close()

    try:
        asyncio.run(scenario())
    finally:
        for d in servers:
            if d.alive():
                d.kill()
