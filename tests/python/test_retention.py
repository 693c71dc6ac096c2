"""Retention (issue 17, docs/storage.md "Generations, pins, GC", "History retention"):
the minimum readable window, end to end through the Stores RPCs.

GC runs every 256 commits of a store; before the window a plain token (no pin, no context)
expired after about that many saves of other writers.
"""
from __future__ import annotations

import contextlib

import grpc
import pytest

from conftest import make_channel
from ubiq_client import Client, error_of, ob, person_model, v, values

SAVES = 600  # two GC batches and more


@contextlib.contextmanager
def client_of(srv):
    ch = make_channel(srv.address)
    try:
        yield Client(ch)
    finally:
        ch.close()


def rename(client: Client, sid: str, oid: str, name: str) -> None:
    client.save(sid, updates=[ob.Update(object_id=oid, values={"name": v(name)})])


def test_a_token_stays_readable_under_write_load_within_the_window(start_server):
    srv = start_server(args=["--min-readable-window-seconds", "3600"])
    with client_of(srv) as client:
        sid = client.open(model=person_model())
        (ann,) = client.insert_people(sid, [{"name": "v0", "age": 1}])
        token = client.current(sid).token
        for i in range(SAVES):
            rename(client, sid, ann, f"v{i + 1}")
        got = client.get(sid, [ann], token=token)
        assert values(got.objects[0])["name"] == "v0"
        assert values(client.get(sid, [ann]).objects[0])["name"] == f"v{SAVES}"


def test_without_a_window_gc_collects_a_plain_token(start_server):
    # the same load without the window: the token's generation is collected, which shows the
    # test above exercised GC
    srv = start_server(args=["--min-readable-window-seconds", "0"])
    with client_of(srv) as client:
        sid = client.open(model=person_model())
        (ann,) = client.insert_people(sid, [{"name": "v0", "age": 1}])
        token = client.current(sid).token
        for i in range(SAVES):
            rename(client, sid, ann, f"v{i + 1}")
        with pytest.raises(grpc.RpcError) as e:
            client.get(sid, [ann], token=token)
        code, message, reason, _, _ = error_of(e.value)
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "GENERATION_EXPIRED")
        assert "collected" in message
        # the server keeps serving, and the current generation reads as before
        assert values(client.get(sid, [ann]).objects[0])["name"] == f"v{SAVES}"


def test_the_window_ends(start_server):
    # a one-second window: once it has passed, the next GC batch collects the token's
    # generation. Saves run until that happens (bounded); no sleep orders anything.
    srv = start_server(args=["--min-readable-window-seconds", "1"])
    with client_of(srv) as client:
        sid = client.open(model=person_model())
        (ann,) = client.insert_people(sid, [{"name": "v0", "age": 1}])
        token = client.current(sid).token
        expired = None
        for i in range(40 * 256):
            rename(client, sid, ann, f"v{i + 1}")
            if i % 256 == 255:
                try:
                    client.get(sid, [ann], token=token)
                except grpc.RpcError as err:
                    expired = error_of(err)
                    break
        assert expired is not None, "the token never expired"
        assert expired[2] == "GENERATION_EXPIRED"
