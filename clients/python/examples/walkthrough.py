#!/usr/bin/env python3
"""A one-minute tour of the Ubiquity Python client against a running ubiquityd.

    ubiquityd --port 50051 --data-dir /tmp/ubiq &
    UBIQ_API_KEY=$(ubiq account key create default --data-dir /tmp/ubiq) \
        python examples/walkthrough.py 127.0.0.1:50051

CI runs it against the server it builds (scripts/test). It exits non-zero if anything is off.
"""

from __future__ import annotations

import os
import sys
import uuid

import ubiquity
from ubiquity import MergePolicy
from ubiquity.v1 import models_pb2 as md


def model() -> md.Model:
    A = md.Attribute
    person = md.Entity(name="Person", attributes=[
        A(name="name", type=md.ATTRIBUTE_TYPE_STRING, required=True),
        A(name="age", type=md.ATTRIBUTE_TYPE_INT32),
    ])
    return md.Model(version_identifier="v1", entities=[person])


def main(target: str) -> None:
    with ubiquity.Client(target, api_key=os.environ["UBIQ_API_KEY"], device_id="walkthrough") as client:
        # 1. A store and its model.
        store = client.open_store(f"walkthrough-{uuid.uuid4()}")
        store.register_model(model())

        # 2. Subscribe before writing: the feed starts at the current generation.
        feed = store.changes(include_values=True)

        # 3. A unit of work: pending until save().
        with store.context("walkthrough") as ctx:
            ann = ctx.insert("Person", {"name": "Ann", "age": 30})
            ctx.insert("Person", {"name": "Bob", "age": 41})
            print("pending:", ctx.state.inserted, "inserts")
            saved = ctx.save()
            ann = saved.permanent_ids[ann]
            print("saved at generation", saved.generation, "Ann is", ann)

        # 4. Fetch with an NSPredicate-format string, arguments and a sort.
        older = store.fetch("Person", "age > $min", {"min": 35}, sort=["-age"])
        print("older than 35:", [p["name"] for p in older])
        before = older.token  # a read generation: fetch "as of" it later

        # 5. A conflict: a context read Ann, then someone else changed her.
        ctx = store.context(merge_policy=MergePolicy.ERROR)
        ctx.fetch("Person")
        store.save(updates={ann: {"age": 31}})
        ctx.update(ann, {"age": 32})
        try:
            ctx.save()
            raise SystemExit("expected a conflict")
        except ubiquity.ConflictError as e:
            c = e.conflicts[0]
            print(f"conflict ({e.reason}): store has age={c.store_values['age']}, we wanted {c.client_changes['age']}")
        ctx.close()  # (with MergePolicy.OBJECT_TRUMP the save would have kept age=32)

        # 6. Time travel: the earlier token still reads Ann at 30.
        print("Ann then:", store.get([ann], at=before)[ann]["age"], "now:", store.get([ann])[ann]["age"])

        # 7. The change feed: every save above, in order.
        txs = feed.transactions()
        for _ in range(2):
            t = next(txs)
            print("feed: generation", t.generation, [(c.kind, c.entity) for c in t.changes])
        feed.close()

        # 8. Errors are typed, with the server's stable reason.
        try:
            store.fetch("Person", "age >")
        except ubiquity.InvalidArgumentError as e:
            print("bad predicate:", e.reason, e.violations[0].field)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051")
