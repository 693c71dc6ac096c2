"""The change feed (issue 17, SPEC §4.5, docs/changes.md): Changes.Subscribe, FetchHistory and
DeleteHistory against the real ubiquityd over TCP with real SQLite files.

Every stream is read by a thread into a queue; tests wait for the events that matter (a caught-up
marker, a transaction's generation), never for time.
"""

from __future__ import annotations

import queue
import threading

import grpc
import pytest
from grpc_status import rpc_status

from conftest import make_channel
from ubiq_client import Client, error_of, ob, person_model, st, v
from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import changes_pb2_grpc as chg

TIMEOUT = 30


class Stream:
    """One Subscribe call read by a background thread: every response lands in `events`;
    the call's end (an RpcError or None) in `ended`."""

    def __init__(self, channel: grpc.Channel, request: ch.SubscribeRequest):
        self.call = chg.ChangesStub(channel).Subscribe(request, timeout=120)
        self.events: queue.Queue = queue.Queue()
        self.ended: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for r in self.call:
                self.events.put(r)
            self.ended.put(None)
        except grpc.RpcError as e:
            self.ended.put(e)

    def next(self, timeout=TIMEOUT) -> ch.SubscribeResponse:
        return self.events.get(timeout=timeout)

    def until(self, predicate, timeout=TIMEOUT) -> list:
        """Responses up to and including the first that satisfies `predicate`."""
        out = []
        while True:
            r = self.next(timeout)
            out.append(r)
            if predicate(r):
                return out

    def caught_up(self) -> list:
        return self.until(lambda r: r.WhichOneof("event") == "caught_up")

    def transactions_through(self, generation: int) -> list:
        """Every transaction received until one at `generation` or later arrived."""
        txs = []
        while not txs or txs[-1].generation < generation:
            r = self.next()
            if r.WhichOneof("event") == "transactions":
                txs.extend(r.transactions.transactions)
        return txs

    def cancel(self):
        self.call.cancel()
        self.thread.join(TIMEOUT)


def subscribe(channel, sid, **kw) -> Stream:
    return Stream(channel, ch.SubscribeRequest(store_id=sid, **kw))


def people(n, prefix="p"):
    return [{"name": f"{prefix}{i}", "age": i} for i in range(n)]


@pytest.fixture
def store(client):
    return client.open(model=person_model())


def test_subscribe_from_now_sees_each_later_save_once(client, store):
    s = subscribe(client.channel, store)
    try:
        s.caught_up()
        ids = client.insert_people(store, people(2))
        r = client.save(store, updates=[ob.Update(object_id=ids[0], values={"age": v(40)})], author="dev-a")
        txs = s.transactions_through(r.generation)
        assert [len(t.changes) for t in txs] == [2, 1]
        assert txs[0].changes[0].kind == ch.Change.KIND_INSERT
        assert txs[1].changes[0].kind == ch.Change.KIND_UPDATE
        assert list(txs[1].changes[0].changed_properties) == ["age"]
        assert txs[1].author == "dev-a"
        assert txs[1].token == r.token
    finally:
        s.cancel()


def test_subscribe_from_a_token_replays_the_backlog_then_goes_live(client, store):
    start = client.current(store).token
    client.insert_people(store, people(3))
    last = client.insert_people(store, people(1, "q"))
    s = subscribe(client.channel, store, **{"from": ch.StartPoint(token=start)})
    try:
        events = s.caught_up()
        txs = [t for r in events if r.WhichOneof("event") == "transactions" for t in r.transactions.transactions]
        assert len(txs) == 2
        assert events[-1].resume_generation == client.current(store).generation
        r = client.save(store, deletes=[ob.Delete(object_id=last[0])])
        live = s.transactions_through(r.generation)
        assert live[-1].changes[0].kind == ch.Change.KIND_DELETE
    finally:
        s.cancel()
