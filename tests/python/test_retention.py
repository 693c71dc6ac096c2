"""Retention (issue 17, docs/storage.md "Generations, pins, GC", "History retention",
"Tombstone index"; docs/changes.md "Retention") against the real ubiquityd over TCP:
the minimum readable window, history retention by size and generations, the tombstone index
after HISTORY_EXPIRED (FetchDeletions), and CURSOR_AT_RISK.

GC runs every 256 commits of a store; before the window a plain token (no pin, no context)
expired after about that many saves of other writers.
"""
from __future__ import annotations

import contextlib

import grpc
import pytest
from grpc_status import rpc_status

from conftest import make_channel
from ubiq_client import Client, error_of, ob, person_model, v, values
from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import changes_pb2_grpc as chg

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


def one_person(client: Client) -> tuple[str, str, bytes]:
    """A new store with one person: (store, person, the token right after the insert)."""
    sid = client.open(model=person_model())
    (ann,) = client.insert_people(sid, [{"name": "v0", "age": 1}])
    return sid, ann, client.current(sid).token


def renames(client: Client, sid: str, oid: str, count: int = SAVES) -> None:
    for i in range(count):
        rename(client, sid, oid, f"v{i + 1}")


def renames_until_error(client: Client, sid: str, oid: str, probe) -> grpc.RpcError | None:
    """Renames until `probe()`, tried after every GC batch (256 commits), fails; its error, or
    None after 40 batches. Waits for the event, never for time."""
    for i in range(40 * 256):
        rename(client, sid, oid, f"v{i + 1}")
        if i % 256 == 255:
            try:
                probe()
            except grpc.RpcError as err:
                return err
    return None


def test_a_token_stays_readable_under_write_load_within_the_window(start_server):
    srv = start_server(args=["--min-readable-window-seconds", "3600"])
    with client_of(srv) as client:
        sid, ann, token = one_person(client)
        renames(client, sid, ann)
        got = client.get(sid, [ann], token=token)
        assert values(got.objects[0])["name"] == "v0"
        assert values(client.get(sid, [ann]).objects[0])["name"] == f"v{SAVES}"


def test_without_a_window_gc_collects_a_plain_token(start_server):
    # the same load without the window: the token's generation is collected, which shows the
    # test above exercised GC
    srv = start_server(args=["--min-readable-window-seconds", "0"])
    with client_of(srv) as client:
        sid, ann, token = one_person(client)
        renames(client, sid, ann)
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
        sid, ann, token = one_person(client)
        expired = renames_until_error(client, sid, ann, lambda: client.get(sid, [ann], token=token))
        assert expired is not None, "the token never expired"
        assert error_of(expired)[2] == "GENERATION_EXPIRED"


# --- history retention, tombstone index, cursor at risk ---

def expired_details(err: grpc.RpcError) -> ch.HistoryExpiredDetails:
    for d in rpc_status.from_call(err).details:
        if d.Is(ch.HistoryExpiredDetails.DESCRIPTOR):
            x = ch.HistoryExpiredDetails()
            d.Unpack(x)
            return x
    raise AssertionError("no HistoryExpiredDetails")


def fetch_history(changes, sid, token: bytes, page_size=0) -> ch.FetchHistoryResponse:
    return changes.FetchHistory(ch.FetchHistoryRequest(store_id=sid, page_size=page_size, **{"from": ch.StartPoint(token=token)}),
                                timeout=30)


def all_deletions(changes, sid, token: bytes, entities=(), page_size=2) -> list:
    out, after = [], token
    while True:
        r = changes.FetchDeletions(ch.FetchDeletionsRequest(store_id=sid, after_token=after, entities=entities,
                                                            page_size=page_size), timeout=30)
        out += list(r.deletions)
        after = r.next_token
        if not r.has_more:
            return out


def snapshot(client: Client, sid: str, token: bytes) -> dict:
    objs = list(client.fetch(sid, "Person", token=token).objects) + list(client.fetch(sid, "Note", token=token).objects)
    return {o.object_id: values(o) for o in objs}


def test_after_history_expired_a_baseline_and_the_deletions_rebuild_the_cache(start_server):
    srv = start_server()
    with client_of(srv) as client:
        changes = chg.ChangesStub(client.channel)
        sid = client.open(model=person_model())
        people = client.insert_people(sid, [{"name": f"P{i}", "age": i} for i in range(10)])
        notes = client.save(sid, inserts=[
            ob.Insert(temporary_id=f"n{i}", entity="Note", values={"title": v(f"note {i}")},
                      relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(object_id=people[i % 2])])})
            for i in range(4)]).permanent_ids
        token = client.current(sid).token
        cache = snapshot(client, sid, token)  # what the client holds at its token

        # while the client is away: deletes (people[0]'s notes go with it: cascade), updates, inserts
        client.save(sid, deletes=[ob.Delete(object_id=people[0]), ob.Delete(object_id=people[5])])
        client.save(sid, deletes=[ob.Delete(object_id=people[7])])
        client.save(sid, updates=[ob.Update(object_id=people[3], values={"age": v(99)})])
        client.insert_people(sid, [{"name": "New", "age": 1}])
        current = client.current(sid).token
        changes.DeleteHistory(ch.DeleteHistoryRequest(store_id=sid, through_token=current), timeout=30)

        with pytest.raises(grpc.RpcError) as e:
            fetch_history(changes, sid, token)
        code, message, reason, _, _ = error_of(e.value)
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_EXPIRED")
        d = expired_details(e.value)
        assert d.deletions_available and "FetchDeletions" in message
        assert d.current_token == current and d.oldest_retained_token == current

        deleted = all_deletions(changes, sid, token)
        gone = {people[0], people[5], people[7], notes["n0"], notes["n2"]}
        assert {x.object_id for x in deleted} == gone
        assert len(deleted) == len(gone)
        assert [x.generation for x in deleted] == sorted(x.generation for x in deleted)
        assert {x.object_id for x in all_deletions(changes, sid, token, entities=["Note"])} == {notes["n0"], notes["n2"]}

        baseline = snapshot(client, sid, d.current_token)
        kept = {k: x for k, x in cache.items() if k not in {x.object_id for x in deleted}}
        kept.update(baseline)  # refresh from the baseline
        assert kept == baseline, "the cache minus the deletions, refreshed, is the store"
        assert set(cache) - set(baseline) == gone, "without the deletions these would stay stale"

        # bad input gets its reason and changes nothing
        with pytest.raises(grpc.RpcError) as e:
            changes.FetchDeletions(ch.FetchDeletionsRequest(store_id=sid, after_token=b"nope"), timeout=30)
        assert error_of(e.value)[2] == "BAD_TOKEN"
        with pytest.raises(grpc.RpcError) as e:
            changes.FetchDeletions(ch.FetchDeletionsRequest(store_id=sid, after_token=token, page_size=20_000), timeout=30)
        assert error_of(e.value)[:1] == (grpc.StatusCode.INVALID_ARGUMENT,)
        with pytest.raises(grpc.RpcError) as e:
            changes.FetchDeletions(ch.FetchDeletionsRequest(store_id=sid, after_token=token, entities=["Nope"]), timeout=30)
        assert error_of(e.value)[:1] == (grpc.StatusCode.INVALID_ARGUMENT,)
        assert len(all_deletions(changes, sid, token)) == len(gone)


def test_history_retention_by_size_trims_the_oldest(start_server):
    srv = start_server(args=["--history-retention-bytes", "20000"])
    with client_of(srv) as client:
        changes = chg.ChangesStub(client.channel)
        sid, ann, _ = one_person(client)
        start = client.current(sid).token
        for i in range(300):  # GC runs after 256 commits
            rename(client, sid, ann, f"renamed {i:04d} " + "x" * 40)
        with pytest.raises(grpc.RpcError) as e:
            fetch_history(changes, sid, start)
        assert error_of(e.value)[2] == "HISTORY_EXPIRED"
        d = expired_details(e.value)
        oldest = d.oldest_retained_token
        kept = []
        after = oldest
        while True:
            r = fetch_history(changes, sid, after, page_size=1000)
            kept += list(r.transactions)
            after = r.next_token
            if not r.has_more:
                break
        assert 0 < len(kept) < 300
        assert kept[-1].token == client.current(sid).token, "the newest stay"


def test_a_subscriber_near_the_retention_floor_gets_cursor_at_risk(start_server):
    srv = start_server(args=["--history-retention-generations", "400"])
    with client_of(srv) as client:
        sid, ann, first = one_person(client)
        renames(client, sid, ann, 390)  # GC trims nothing yet: fewer than 400 generations
        # from the oldest position: 10 commits from expiry, with 400 to go for the current one
        call = chg.ChangesStub(client.channel).Subscribe(
            ch.SubscribeRequest(store_id=sid, **{"from": ch.StartPoint(token=first)}), timeout=60)
        events = []
        for r in call:
            events.append(r)
            if r.WhichOneof("event") == "caught_up":
                break
        call.cancel()
        risk = [r for r in events if r.WhichOneof("event") == "cursor_at_risk"]
        assert len(risk) == 1, [r.WhichOneof("event") for r in events]
        assert events[0].WhichOneof("event") == "cursor_at_risk", "before anything else"
        assert risk[0].resume_token == first
        assert risk[0].cursor_at_risk.oldest_retained_token
        assert risk[0].cursor_at_risk.expected_expiry.seconds > 0
        # a subscriber starting at the current position is nowhere near the floor
        call = chg.ChangesStub(client.channel).Subscribe(
            ch.SubscribeRequest(store_id=sid, **{"from": ch.StartPoint(now=True)}), timeout=60)
        for r in call:
            assert r.WhichOneof("event") != "cursor_at_risk"
            if r.WhichOneof("event") == "caught_up":
                break
        call.cancel()


def test_history_retention_by_age_trims_what_is_older(start_server):
    # one second of history: once the first transactions are older than that, the next GC batch
    # (every 256 commits) trims them. Saves run until that happens (bounded); no sleep.
    srv = start_server(args=["--history-retention-seconds", "1"])
    with client_of(srv) as client:
        changes = chg.ChangesStub(client.channel)
        sid, ann, first = one_person(client)
        expired = renames_until_error(client, sid, ann, lambda: fetch_history(changes, sid, first, page_size=1))
        assert expired is not None, "history was never trimmed"
        assert error_of(expired)[2] == "HISTORY_EXPIRED"
        d = expired_details(expired)
        assert d.deletions_available, "nothing was deleted since the token: the index covers it"
        assert d.current_token == client.current(sid).token
        # what is left reads from the oldest retained token on (a save after the trim is there)
        rename(client, sid, ann, "after the trim")
        page = fetch_history(changes, sid, d.oldest_retained_token, page_size=1000)
        assert page.transactions and page.transactions[-1].token == client.current(sid).token
