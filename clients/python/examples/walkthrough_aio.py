#!/usr/bin/env python3
"""The walkthrough with the asyncio client (`ubiquity.aio`): the same calls, awaited.

    UBIQ_API_KEY=... python examples/walkthrough_aio.py 127.0.0.1:50051
    UBIQ_TLS_CA=ca.crt UBIQ_API_KEY=... python examples/walkthrough_aio.py 127.0.0.1:50051   # over TLS

CI runs it against the server it builds (scripts/test). It exits non-zero if anything is off.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import ubiquity
import ubiquity.aio
from ubiquity import MergePolicy
from ubiquity.v1 import models_pb2 as md


def model() -> md.Model:
    A = md.Attribute
    return md.Model(version_identifier="v1", entities=[md.Entity(name="Person", attributes=[
        A(name="name", type=md.ATTRIBUTE_TYPE_STRING, required=True), A(name="age", type=md.ATTRIBUTE_TYPE_INT32)])])


async def main(target: str) -> None:
    ca = os.environ.get("UBIQ_TLS_CA")
    tls = ubiquity.TLS(ca=ca) if ca else None
    async with ubiquity.aio.Client(target, tls=tls, api_key=os.environ["UBIQ_API_KEY"],
                                   device_id="walkthrough-aio") as client:
        store = await client.open_store(f"walkthrough-aio-{uuid.uuid4()}")
        await store.register_model(model())
        feed = await store.changes()

        # A context is a unit of work; `async with` closes it on the server.
        async with await store.context("ui", merge_policy=MergePolicy.OBJECT_TRUMP) as ctx:
            ann = await ctx.insert("Person", {"name": "Ann", "age": 30})
            await ctx.insert("Person", {"name": "Bob", "age": 40})
            saved = await ctx.save()
            ann = saved.permanent_ids[ann]
        print("saved at generation", saved.generation)

        # Set-based writes and initial data applied once, however often this runs.
        await store.batch_insert("Person", [{"name": f"guest{i}", "age": 20 + i} for i in range(3)])
        seeded = await store.seed("walkthrough-seed", {"cid": ("Person", {"name": "Cid", "age": 50})})
        print("seeded:", seeded.applied)

        older = await store.fetch("Person", "age > $min", {"min": 35}, sort=["age"])
        print("older than 35:", [p["name"] for p in older])

        async for tx in feed.transactions():
            print("feed: generation", tx.generation, len(tx.changes), "change(s)")
            break
        feed.close()

        # The account's key-value store: compare-and-set by version.
        w = await client.key_values.set("walkthrough.theme", b"dark")
        try:
            # a stale version (another device wrote since): refused, with the current one
            await client.key_values.set("walkthrough.theme", b"light", expected_version=w.version + 1)
        except ubiquity.KeyValueConflictError as e:
            print("key-value conflict: current version", e.current_version)

        try:
            await store.fetch("Person", "age >")
        except ubiquity.InvalidArgumentError as e:
            print("bad predicate:", e.reason, e.violations[0].field if e.violations else "")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} HOST:PORT   (UBIQ_API_KEY in the environment)")
    asyncio.run(main(sys.argv[1]))
