"""The asyncio client against a real ubiquityd: save, fetch at a token, typed errors, feed resume."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc.aio
import pytest

import ubiq_harness
import ubiquity
import ubiquity.aio
from conftest import person_model


async def person_store(client: ubiquity.aio.Client, prefix: str = "aio") -> ubiquity.aio.Store:
    store = await client.open_store(f"{prefix}-{uuid.uuid4()}")
    await store.register_model(person_model())
    return store


def test_aio_save_fetch_get_and_typed_errors(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key) as client:
            store = await person_store(client)
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


@pytest.mark.parametrize("policy,expect", [
    (ubiquity.MergePolicy.STORE_TRUMP, {"age": 35, "score": 9.0}),
    (ubiquity.MergePolicy.OBJECT_TRUMP, {"age": 33, "score": 9.0}),
    (ubiquity.MergePolicy.OVERWRITE, {"age": 33, "score": 9.0}),
    (ubiquity.MergePolicy.ROLLBACK, {"age": 35, "score": 1.0}),
])
def test_aio_context_merges_a_conflict_under_each_policy(server: ubiq_harness.Ubiquityd,
                                                         policy: ubiquity.MergePolicy, expect: dict[str, object]) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key) as client:
            store = await person_store(client)
            ann = (await store.save(inserts={"a": ("Person", {"name": "Ann", "age": 30, "score": 1.0})})).permanent_ids["a"]
            async with await store.context("ui", merge_policy=policy) as ctx:
                await ctx.fetch("Person")  # pins the generation the context reads
                await store.save(updates={ann: {"age": 35}})
                await ctx.update(ann, {"age": 33, "score": 9.0})
                assert ctx.has_changes
                await ctx.save()
                assert not ctx.has_changes
            got = (await store.get([ann]))[ann]
            assert {k: got[k] for k in expect} == expect

    asyncio.run(scenario())


def test_aio_context_unit_of_work_pinning_nesting_and_errors(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key) as client:
            store = await person_store(client)
            async with await store.context("ui") as ctx:
                tmp = await ctx.insert("Person", {"name": "Ann", "age": 30})
                assert ctx.state.inserted == 1 and len(await ctx.fetch("Person", include_pending=False)) == 0
                assert [o["name"] for o in await ctx.fetch("Person")] == ["Ann"]
                ann = (await ctx.save()).permanent_ids[tmp]
                pinned = await ctx.fetch("Person")
                await store.save(updates={ann: {"age": 40}})
                assert (await ctx.fetch("Person")).objects[0]["age"] == 30  # still the pinned generation
                await ctx.refresh()
                assert (await ctx.fetch("Person")).objects[0]["age"] == 40
                await ctx.pin(pinned.token)
                assert (await ctx.fetch("Person")).objects[0]["age"] == 30
                await ctx.pin("unpinned")

                child = await ctx.child("edit")
                await child.update(ann, {"age": 41})
                await child.save()  # into the parent, not the store
                assert ctx.has_changes or (await ctx.refresh_state()).has_changes
                assert (await store.get([ann]))[ann]["age"] == 40
                await child.close()
                await ctx.save()
                assert (await store.get([ann]))[ann]["age"] == 41

                await ctx.delete(ann)
                await ctx.rollback()
                assert not (await ctx.refresh_state()).has_changes
                await ctx.insert("Person", {"name": "Bob"})
                await ctx.reset()
                assert not ctx.has_changes

                await ctx.update(ann, {"email": "a@x"})
                await store.save(inserts={"b": ("Person", {"name": "Bea", "email": "a@x"})})
                with pytest.raises(ubiquity.ConstraintError) as e:
                    await ctx.save()
                assert e.value.reason == "CONSTRAINT_CONFLICT" and e.value.conflicts[0].kind == "uniqueness_clash"
            with pytest.raises(ubiquity.NotFoundError) as nf:
                await ctx.refresh_state()  # closed by `async with`
            assert nf.value.reason == "CONTEXT_NOT_FOUND"

    asyncio.run(scenario())


def test_aio_store_maintenance_streams_and_key_values(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        async with ubiquity.aio.Client(server.address, api_key=server.api_key) as client:
            store = await person_store(client)
            assert (await store.get_model()).model.version_identifier == "v1"
            assert (await store.history()).transactions == []
            b = await store.batch_insert("Person", [{"name": "Ann", "age": 1}, {"name": "Ann", "age": 2},
                                                    {"name": "Cid", "age": 3}], return_object_ids=True)
            assert b.count == 3
            assert (await store.batch_update("Person", "age > 1", values={"score": 2.0})).count == 2
            assert (await store.deduplicate("Person", ["name"])).removed == 1
            s = await store.seed("s1", {"x": ("Person", {"name": "Dee"})})
            assert s.applied and not (await store.seed("s1", {"x": ("Person", {"name": "Dee"})})).applied
            pages = [p async for p in store.fetch_stream("Person", sort=["name"])]
            assert [o["name"] for p in pages for o in p] == ["Ann", "Cid", "Dee"]
            chunks = [c async for c in store.export_baseline(batch_size=2)]
            assert sum(len(c.objects) for c in chunks) == 3 and chunks[-1].last
            copy = await person_store(client, "aio-copy")
            assert (await copy.import_store(store)).imported == 3
            before_delete = await copy.current_token()
            assert (await copy.batch_delete("Person", "name == 'Dee'")).count == 1
            token = await store.replace_with(copy)
            assert sorted(o["name"] for o in await store.fetch("Person", at=token)) == ["Ann", "Cid"]
            h = await store.history(include_values=True)
            assert h.transactions[-1].token == token and not h.has_more
            gone = await copy.deletions(before_delete)
            assert [d.entity for d in gone.deletions] == ["Person"]  # Dee's batch delete
            await copy.destroy()
            with pytest.raises(ubiquity.NotFoundError):
                await copy.current_token()

            key = f"aio.{uuid.uuid4().hex[:8]}"
            w = await client.key_values.set(key, b"v", must_not_exist=True)
            with pytest.raises(ubiquity.KeyValueConflictError) as e:
                await client.key_values.set(key, b"w", expected_version=w.version + 1)
            assert e.value.current_version == w.version
            assert (await client.key_values.get(key)).value == b"v"
            assert [x.key async for x in client.key_values.entries(key)] == [key]
            assert (await client.key_values.delete(key)).existed

    asyncio.run(scenario())


def test_aio_session_signs_in_on_the_aio_channel_and_again_after_sign_out(server: ubiq_harness.Ubiquityd) -> None:
    async def scenario() -> None:
        client = ubiquity.aio.Client(server.address, api_key=server.api_key, device_id="aio-test")
        try:
            first = await client.list_stores()
            session = client._calls.session
            assert session is not None and session.account_id == "default"
            token = session.state.token
            await client.sign_out()
            assert await client.list_stores() == first  # signed in again
            assert session.state.token and session.state.token != token
            # the old session was ended on the server: a call with it is refused
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await client.channel.unary_unary("/ubiquity.v1.Stores/ListStores")(
                    b"", metadata=(("authorization", f"Bearer {token}"),), timeout=10)
            assert ubiquity.from_rpc_error(e.value).reason == "SESSION_REVOKED"
        finally:
            await client.close()

    asyncio.run(scenario())
