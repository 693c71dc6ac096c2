"""The change feed (issue 17, SPEC §4.5, docs/changes.md): Changes.Subscribe, FetchHistory and
DeleteHistory against the real ubiquityd over TCP with real SQLite files.

Every stream is read by a thread into a queue; tests wait for the events that matter (a caught-up
marker, a transaction's generation), never for time.
"""

from __future__ import annotations

import contextlib
import queue
import random
import signal
import threading

import grpc
import pytest
from grpc_status import rpc_status

import ubiq_harness
from conftest import make_channel
from ubiq_client import Client, error_of, ob, person_model, st, v
from ubiquity.v1 import changes_pb2 as ch
from ubiquity.v1 import changes_pb2_grpc as chg

TIMEOUT = 30


class Stream:
    """One Subscribe call read by a background thread: every response lands in `events`;
    the call's end (an RpcError or None) in `ended`."""

    def __init__(self, channel: grpc.Channel, request: ch.SubscribeRequest, metadata=None):
        self.call = chg.ChangesStub(channel).Subscribe(request, metadata=metadata, timeout=120)
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
        """Every transaction received until the resume token reached `generation` (a filtered
        stream's token also moves past the transactions it skips)."""
        txs = []
        while True:
            r = self.next()
            if r.WhichOneof("event") == "transactions":
                txs.extend(r.transactions.transactions)
            if r.resume_generation >= generation:
                return txs

    def cancel(self):
        self.call.cancel()
        self.thread.join(TIMEOUT)


@contextlib.contextmanager
def own_server(start_server, *args):
    """A ubiquityd of the test's own started with `args`, and a client of it."""
    srv = start_server(args=list(args))
    c = Client(make_channel(srv.address))
    try:
        yield srv, c
    finally:
        c.channel.close()


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


# -- helpers for the tests below ------------------------------------------------------------

def changes_stub(client) -> chg.ChangesStub:
    return chg.ChangesStub(client.channel)


def history(client, sid, after: bytes | None = None, **filter_kw) -> list:
    """Every transaction FetchHistory returns after `after` (oldest when None), page by page."""
    stub = changes_stub(client)
    start = ch.StartPoint(token=after) if after is not None else ch.StartPoint(oldest=True)
    out = []
    while True:
        page = stub.FetchHistory(ch.FetchHistoryRequest(store_id=sid, page_size=7, filter=ch.ChangeFilter(**filter_kw),
                                                        **{"from": start}), timeout=TIMEOUT)
        out.extend(page.transactions)
        if not page.has_more:
            return out
        start = ch.StartPoint(token=page.next_token)


def key(tx) -> tuple:
    """What a subscriber and FetchHistory must agree on for one transaction."""
    return (tx.generation, tx.author, tx.context_name,
            tuple((c.kind, c.entity, c.object_id, tuple(c.changed_properties),
                   tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in c.values.items())),
                   tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in c.tombstone.items())))
                  for c in tx.changes))


def details(err: grpc.RpcError, message_type):
    """The first status detail of `message_type`, or None."""
    status = rpc_status.from_call(err)
    for d in (status.details if status else []):
        if d.Is(message_type.DESCRIPTOR):
            m = message_type()
            d.Unpack(m)
            return m
    return None


def future_token(token: bytes, ahead: int) -> bytes:
    """The same store and epoch, `ahead` generations later (33 bytes: version, UUID, epoch, generation)."""
    gen = int.from_bytes(token[25:33], "big") + ahead
    return token[:25] + gen.to_bytes(8, "big")


def model_with_tombstones():
    m = person_model()
    for a in m.entities[0].attributes:
        if a.name == "email":
            a.keep_on_delete = True
    return m


# -- filters and record shape -----------------------------------------------------------------

def test_filters_entities_authors_values_and_tombstones(client):
    sid = client.open(model=model_with_tombstones())
    notes_only = subscribe(client.channel, sid, filter=ch.ChangeFilter(entities=["Note"]))
    not_mine = subscribe(client.channel, sid, filter=ch.ChangeFilter(exclude_authors=["me"], include_values=True,
                                                                        include_tombstones=True))
    try:
        notes_only.caught_up(); not_mine.caught_up()
        mine = client.save(sid, inserts=[ob.Insert(temporary_id="a", entity="Person", values={"name": v("A"), "email": v("a@x")})],
                           author="me")
        pid = mine.permanent_ids["a"]
        theirs = client.save(sid, inserts=[ob.Insert(temporary_id="n", entity="Note", values={"title": v("hello")})],
                             updates=[ob.Update(object_id=pid, values={"age": v(33)})], author="other")
        gone = client.save(sid, deletes=[ob.Delete(object_id=pid)], author="other")

        txs = not_mine.transactions_through(gone.generation)
        assert [t.generation for t in txs] == [theirs.generation, gone.generation], "the excluded author's save is skipped"
        by_kind = {c.kind: c for c in txs[0].changes}
        assert by_kind[ch.Change.KIND_UPDATE].values["age"] == v(33, kind="int32"), by_kind[ch.Change.KIND_UPDATE]
        assert by_kind[ch.Change.KIND_INSERT].values["title"].string_value == "hello"
        assert not by_kind[ch.Change.KIND_UPDATE].values_unavailable
        tomb = txs[1].changes[0]
        assert tomb.kind == ch.Change.KIND_DELETE and tomb.tombstone["email"].string_value == "a@x"

        notes = notes_only.transactions_through(theirs.generation)
        assert [t.generation for t in notes] == [theirs.generation]
        assert [c.entity for c in notes[0].changes] == ["Note"], "only the filter's entity, the rest of the transaction dropped"

        # FetchHistory: same filters, same records
        assert [key(t) for t in history(client, sid, mine.token, exclude_authors=["me"], include_values=True,
                                        include_tombstones=True)] == [key(t) for t in txs]
    finally:
        notes_only.cancel(); not_mine.cancel()


def test_unknown_filter_entity_is_invalid_and_names_the_field(client, store):
    with pytest.raises(grpc.RpcError) as e:
        history(client, store, entities=["Nope"])
    code, msg, reason, violations, _ = error_of(e.value)
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_ENTITY")
    assert violations[0].field == "filter.entities[0]"
    s = subscribe(client.channel, store, filter=ch.ChangeFilter(entities=["Nope"]))
    err = s.ended.get(timeout=TIMEOUT)
    assert err is not None and error_of(err)[2] == "UNKNOWN_ENTITY"


# -- equality with FetchHistory under concurrent writers ------------------------------------------

def test_concurrent_writers_every_subscriber_equals_fetch_history_filtered_the_same_way(client, server):
    sid = client.open(model=person_model())
    start = client.current(sid).token
    filters = [dict(), dict(entities=["Note"]), dict(exclude_authors=["w0"]), dict(include_values=True)]
    streams = [subscribe(client.channel, sid, filter=ch.ChangeFilter(**f), **{"from": ch.StartPoint(token=start)})
               for f in filters]
    writers = [Client(make_channel(server.address)) for _ in range(3)]
    last = []
    lock = threading.Lock()

    def write(i, w):
        rnd = random.Random(1700 + i)
        ids = []
        for n in range(40):
            if ids and rnd.random() < 0.3:
                r = w.save(sid, updates=[ob.Update(object_id=rnd.choice(ids), values={"age": v(rnd.randrange(100))})], author=f"w{i}")
            else:
                ins = [ob.Insert(temporary_id="p", entity="Person", values={"name": v(f"w{i}-{n}")})]
                if rnd.random() < 0.5:
                    ins.append(ob.Insert(temporary_id="n", entity="Note", values={"title": v(f"t{n}")}))
                r = w.save(sid, inserts=ins, author=f"w{i}")
                ids.append(r.permanent_ids["p"])
            with lock:
                last.append(r.generation)

    try:
        for s in streams:
            s.caught_up()
        threads = [threading.Thread(target=write, args=(i, w)) for i, w in enumerate(writers)]
        for t in threads: t.start()
        for t in threads: t.join(120)
        end = max(last)
        for f, s in zip(filters, streams):
            got = []
            # the resume token, not the last transaction, says how far a filtered stream got: a
            # batch's token covers the skipped transactions after it, a progress marker the rest
            while True:
                r = s.next()
                if r.WhichOneof("event") == "transactions":
                    got.extend(r.transactions.transactions)
                if r.resume_generation >= end:
                    break
            expected = history(client, sid, start, **f)
            assert [key(t) for t in got] == [key(t) for t in expected], f"filter {f}"
            assert [t.generation for t in got] == sorted(t.generation for t in got)
        assert len(history(client, sid, start)) == 120
    finally:
        for s in streams: s.cancel()
        for w in writers: w.channel.close()


def test_pinned_fetch_at_t_plus_changes_after_t_equals_fetch_at_current(client):
    rnd = random.Random(42)
    sid = client.open(model=person_model())
    ids = client.insert_people(sid, people(20))
    t = client.current(sid).token
    baseline = {o.object_id: dict(o.values) for o in client.fetch(sid, "Person", token=t).objects}
    s = subscribe(client.channel, sid, filter=ch.ChangeFilter(include_values=True), **{"from": ch.StartPoint(token=t)})
    try:
        live = list(ids)
        last = None
        for n in range(60):
            op = rnd.random()
            if op < 0.4:
                last = client.save(sid, updates=[ob.Update(object_id=rnd.choice(live), values={"age": v(rnd.randrange(1000)),
                                                                                                 "score": v(rnd.random())})])
            elif op < 0.7 or len(live) < 5:
                last = client.save(sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"name": v(f"n{n}"), "age": v(n)})])
                live.append(last.permanent_ids["x"])
            else:
                victim = live.pop(rnd.randrange(len(live)))
                last = client.save(sid, deletes=[ob.Delete(object_id=victim)])
        view = {k: dict(vals) for k, vals in baseline.items()}
        for tx in s.transactions_through(last.generation):
            for c in tx.changes:
                if c.entity != "Person":
                    continue
                if c.kind == ch.Change.KIND_DELETE:
                    view.pop(c.object_id, None)
                else:
                    assert not c.values_unavailable
                    obj = view.setdefault(c.object_id, {})
                    for name in c.changed_properties:
                        if name in c.values:
                            obj[name] = c.values[name]
                        else:
                            obj.pop(name, None)
        current = {o.object_id: dict(o.values) for o in client.fetch(sid, "Person").objects}

        def norm(d):
            return {k: {n: x.SerializeToString(deterministic=True) for n, x in vals.items()
                        if x.WhichOneof("kind") not in (None, "null_value")} for k, vals in d.items()}
        assert norm(view) == norm(current)
    finally:
        s.cancel()


# -- tokens and their errors ---------------------------------------------------------------------

def test_expired_foreign_future_and_replaced_tokens_get_their_reasons(client, second, store, admin):
    stub = changes_stub(client)
    first = client.current(store).token
    client.insert_people(store, people(3))
    mid = client.current(store).token
    client.insert_people(store, people(2, "r"))
    r = stub.DeleteHistory(ch.DeleteHistoryRequest(store_id=store, through_token=mid), timeout=TIMEOUT)
    assert r.oldest_retained_token == mid

    def failure(start, fetch=False):
        if fetch:
            with pytest.raises(grpc.RpcError) as e:
                stub.FetchHistory(ch.FetchHistoryRequest(store_id=store, **{"from": start}), timeout=TIMEOUT)
            return e.value
        s = Stream(client.channel, ch.SubscribeRequest(store_id=store, **{"from": start}))
        err = s.ended.get(timeout=TIMEOUT)
        assert err is not None and s.events.empty()
        return err

    for fetch in (False, True):
        err = failure(ch.StartPoint(token=first), fetch)
        assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_EXPIRED")
        d = details(err, ch.HistoryExpiredDetails)
        assert d.oldest_retained_token == mid
        assert d.current_token == client.current(store).token

        other = second.open(model=person_model())
        err = failure(ch.StartPoint(token=second.current(other).token), fetch)
        assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_TOKEN")

        err = failure(ch.StartPoint(token=future_token(client.current(store).token, 5)), fetch)
        assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_TOKEN")
        assert "generation" in err.details()

        err = failure(ch.StartPoint(token=b"\x01garbage"), fetch)
        assert error_of(err)[2] == "BAD_TOKEN"

    # from the oldest retained: exactly the transactions after the trim
    assert [t.generation for t in history(client, store)] == [int.from_bytes(mid[25:], "big") + 1]

    # a replaced store: the running subscription ends STORE_REPLACED, the old token is refused
    before = client.current(store).token
    live = subscribe(client.channel, store)
    live.caught_up()
    source = client.open(model=person_model())
    client.insert_people(source, people(1))
    client.stores.ReplaceStore(st.ReplaceStoreRequest(store_id=store, source_store_id=source), timeout=TIMEOUT)
    err = live.ended.get(timeout=TIMEOUT)
    assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_REPLACED")
    assert details(err, ch.ResumeDetails).resume_token == before
    err = failure(ch.StartPoint(token=before))
    assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_REPLACED")

    # a destroyed store: the subscription ends NOT_FOUND
    live = subscribe(client.channel, store)
    live.caught_up()
    client.stores.DestroyStore(st.DestroyStoreRequest(store_id=store), timeout=TIMEOUT)
    err = live.ended.get(timeout=TIMEOUT)
    assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.NOT_FOUND, "STORE_NOT_FOUND")

    from ubiquity.v1 import admin_pb2
    assert admin.Ping(admin_pb2.PingRequest(payload=b"ok"), timeout=10).payload == b"ok"


def test_bad_requests_are_refused_with_their_fields(client, store):
    stub = changes_stub(client)
    with pytest.raises(grpc.RpcError) as e:
        stub.FetchHistory(ch.FetchHistoryRequest(store_id=store, page_size=5000), timeout=TIMEOUT)
    assert error_of(e.value)[3][0].field == "page_size"
    s = subscribe(client.channel, store, coalesce_window_ms=20_000)
    err = s.ended.get(timeout=TIMEOUT)
    assert error_of(err)[3][0].field == "coalesce_window_ms"
    s = subscribe(client.channel, "not-a-uuid")
    assert error_of(s.ended.get(timeout=TIMEOUT))[2] == "BAD_STORE_ID"
    with pytest.raises(grpc.RpcError) as e:
        stub.DeleteHistory(ch.DeleteHistoryRequest(store_id=store, through_token=future_token(client.current(store).token, 3)),
                           timeout=TIMEOUT)
    assert error_of(e.value)[2] == "BAD_TOKEN"


# -- markers, parts, limits -------------------------------------------------------------------

def test_progress_markers_advance_an_idle_filtered_subscriber(start_server):
    with own_server(start_server, "--feed-progress-interval-ms", "50") as (srv, c):
        sid = c.open(model=person_model())
        s = subscribe(c.channel, sid, filter=ch.ChangeFilter(entities=["Note"]))
        s.caught_up()
        r = c.save(sid, inserts=[ob.Insert(temporary_id="p", entity="Person", values={"name": v("x")})])
        events = s.until(lambda e: e.WhichOneof("event") == "progress")
        assert [e.WhichOneof("event") for e in events] == ["progress"], "nothing the filter wants was sent"
        assert events[-1].resume_token == r.token
        # resuming from the progress token replays nothing
        again = subscribe(c.channel, sid, **{"from": ch.StartPoint(token=events[-1].resume_token)})
        assert [e.WhichOneof("event") for e in again.caught_up()] == ["caught_up"]
        again.cancel(); s.cancel()


def test_a_transaction_larger_than_a_response_comes_in_parts(start_server):
    with own_server(start_server, "--max-feed-response-bytes", "4096") as (srv, c):
        sid = c.open(model=person_model())
        before = c.current(sid).token
        s = subscribe(c.channel, sid)
        s.caught_up()
        c.insert_people(sid, [{"name": f"person-with-a-longish-name-{i}", "age": i} for i in range(300)])
        small = c.insert_people(sid, people(1, "small"))
        parts, whole = [], None
        while whole is None:
            r = s.next()
            if r.WhichOneof("event") != "transactions":
                continue
            for t in r.transactions.transactions:
                if t.HasField("part"):
                    assert r.ByteSize() <= 4096 + 128
                    parts.append((t, r.resume_token))
                elif parts:
                    whole = t
        assert len(parts) > 1 and [p.part.index for p, _ in parts] == list(range(len(parts)))
        assert all(p.part.count == len(parts) for p, _ in parts)
        assert all(tok == before for _, tok in parts[:-1]), "a non-final part resumes before the transaction"
        assert parts[-1][1] == parts[-1][0].token
        merged = ch.Transaction()
        merged.CopyFrom(parts[0][0])
        merged.ClearField("part")
        for p, _ in parts[1:]:
            merged.changes.extend(p.changes)
        assert key(merged) == key(history(c, sid, before)[0])
        assert whole.changes[0].object_id == small[0]
        s.cancel()


def test_subscriber_limits_per_connection(start_server):
    with own_server(start_server, "--max-subscribers-per-connection", "2") as (srv, c):
        sid = c.open(model=person_model())
        a, b = subscribe(c.channel, sid), subscribe(c.channel, sid)
        a.caught_up(); b.caught_up()
        third = subscribe(c.channel, sid)
        err = third.ended.get(timeout=TIMEOUT)
        assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED")
        other = Client(make_channel(srv.address))
        ok = subscribe(other.channel, sid)
        ok.caught_up()
        a.cancel()
        # the slot is free again once the cancelled call is gone
        ubiq_harness.wait_until(lambda: admitted(c.channel, sid), 15, message="a freed subscription slot")
        ok.cancel(); b.cancel(); other.channel.close()


def admitted(channel, sid) -> bool:
    """Whether a Subscribe on `channel` is admitted now (its first response arrives) rather than
    refused LIMIT_EXCEEDED."""
    probe = chg.ChangesStub(channel).Subscribe(ch.SubscribeRequest(store_id=sid), timeout=TIMEOUT)
    try:
        return next(iter(probe)).WhichOneof("event") == "caught_up"
    except grpc.RpcError as e:
        assert error_of(e)[2] == "LIMIT_EXCEEDED"
        return False
    finally:
        probe.cancel()


# -- slow subscribers, shutdown, kill -9 ----------------------------------------------------------

def test_a_subscriber_that_never_reads_is_ended_resumably_without_slowing_others(start_server):
    srv = start_server(args=["--max-subscriber-lag", "20", "--feed-progress-interval-ms", "50",
                             "--max-subscribers-per-connection", "1", "--max-write-queue-bytes", "262144",
                             "--stream-send-buffer-bytes", "65536"])
    # the stuck client: no BDP probing, so its flow-control window stays at 64 KiB
    stuck = Client(make_channel(srv.address, options=[("grpc.http2.bdp_probe", 0)]))
    good = Client(make_channel(srv.address))
    try:
        sid = good.open(model=person_model())
        start = good.current(sid).token
        slow = chg.ChangesStub(stuck.channel).Subscribe(
            ch.SubscribeRequest(store_id=sid, filter=ch.ChangeFilter(include_values=True), **{"from": ch.StartPoint(token=start)}),
            timeout=300)
        reader = subscribe(good.channel, sid)
        reader.caught_up()
        rss0 = srv.rss_bytes()
        big = "x" * 2000
        last = None
        n = 0

        while True:
            for _ in range(10):
                last = good.save(sid, inserts=[ob.Insert(temporary_id=f"p{i}", entity="Person", values={"name": v(f"{big}{n}-{i}")})
                                               for i in range(100)])
                n += 1
            got = reader.transactions_through(last.generation)
            assert got[-1].generation == last.generation, "the reading subscriber keeps up"
            # the stuck connection may hold one subscription: a second is admitted once the
            # server ended the stuck one
            if admitted(stuck.channel, sid):
                break
            assert n < 2000, "the stuck subscriber was never ended"
        rss1 = srv.rss_bytes()
        assert rss1 - rss0 < 256 << 20, f"server RSS grew {(rss1 - rss0) >> 20} MiB while a subscriber did not read"

        # now read it: whatever was queued, then RESOURCE_EXHAUSTED with a token to resume from
        received = []
        last_token = start
        with pytest.raises(grpc.RpcError) as e:
            for r in slow:
                last_token = r.resume_token
                if r.WhichOneof("event") == "transactions":
                    received.extend(t.generation for t in r.transactions.transactions)
        code, _, reason, _, _ = error_of(e.value)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "SUBSCRIBER_TOO_SLOW")
        resume = details(e.value, ch.ResumeDetails)
        assert resume.resume_token == last_token
        assert len(received) < n
        later = Client(make_channel(srv.address))
        again = subscribe(later.channel, sid, **{"from": ch.StartPoint(token=resume.resume_token)})
        rest = [t.generation for r in again.caught_up() if r.WhichOneof("event") == "transactions" for t in r.transactions.transactions]
        again.cancel()
        later.channel.close()
        first = int.from_bytes(start[25:], "big")
        assert received + rest == list(range(first + 1, last.generation + 1)), "nothing missing, nothing twice"
        reader.cancel()
    finally:
        stuck.channel.close(); good.channel.close()


def test_shutdown_ends_subscriptions_promptly_with_their_resume_token(start_server):
    srv = start_server(args=["--shutdown-grace-seconds", "30"])
    c = Client(make_channel(srv.address))
    try:
        sid = c.open(model=person_model())
        s = subscribe(c.channel, sid)
        s.caught_up()
        r = c.save(sid, inserts=[ob.Insert(temporary_id="p", entity="Person", values={"name": v("x")})])
        s.transactions_through(r.generation)
        srv.send_signal(signal.SIGTERM)
        err = s.ended.get(timeout=TIMEOUT)
        assert (err.code(), error_of(err)[2]) == (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN")
        assert details(err, ch.ResumeDetails).resume_token == r.token
        # far inside the 30 s grace: the open subscription did not hold the drain up
        assert srv.wait(20) == 0
    finally:
        c.channel.close()


def test_kill_9_during_saves_subscribers_resume_and_miss_nothing_acknowledged(start_server):
    srv = start_server(name="feedcrash")
    c = Client(make_channel(srv.address))
    sid = c.open(model=person_model())
    start = c.current(sid).token
    acked: list[int] = []
    resume = {"all": start, "notes": start}
    seen = {"all": [], "notes": []}
    filters = {"all": ch.ChangeFilter(), "notes": ch.ChangeFilter(entities=["Note"])}
    stop = threading.Event()

    def follow(name, channel):
        s = subscribe(channel, sid, filter=filters[name], **{"from": ch.StartPoint(token=resume[name])})
        while True:
            try:
                r = s.next(timeout=5)
            except queue.Empty:
                if not s.ended.empty():
                    return
                continue
            if r.WhichOneof("event") == "transactions":
                seen[name].extend(t.generation for t in r.transactions.transactions)
            resume[name] = r.resume_token

    def write(w):
        n = 0
        while not stop.is_set():
            ins = [ob.Insert(temporary_id="p", entity="Person", values={"name": v(f"k{n}")})]
            if n % 3 == 0:
                ins.append(ob.Insert(temporary_id="n", entity="Note", values={"title": v(f"t{n}")}))
            try:
                acked.append(w.save(sid, inserts=ins).generation)
            except grpc.RpcError:
                return
            n += 1

    followers = [threading.Thread(target=follow, args=(name, c.channel), daemon=True) for name in resume]
    for t in followers: t.start()
    w = Client(make_channel(srv.address))
    writer = threading.Thread(target=write, args=(w,), daemon=True)
    writer.start()
    ubiq_harness.wait_until(lambda: len(acked) >= 50 and len(seen["all"]) >= 20, 60, message="saves and deliveries under way")
    srv.kill()
    writer.join(30); stop.set()
    for t in followers: t.join(30)
    c.channel.close(); w.channel.close()

    srv.start()
    c = Client(make_channel(srv.address))
    try:
        end = c.current(sid).generation
        assert end >= max(acked), "an acknowledged save was lost"
        for name in resume:
            s = subscribe(c.channel, sid, filter=filters[name], **{"from": ch.StartPoint(token=resume[name])})
            for r in s.caught_up():
                if r.WhichOneof("event") == "transactions":
                    seen[name].extend(t.generation for t in r.transactions.transactions)
            s.cancel()
        expected_all = [t.generation for t in history(c, sid, start)]
        expected_notes = [t.generation for t in history(c, sid, start, entities=["Note"])]
        assert sorted(set(seen["all"])) == expected_all
        assert sorted(set(seen["notes"])) == expected_notes
        assert set(acked) <= set(expected_all), "every acknowledged save was delivered"
        # at least once: duplicates only at the crash boundary, never out of order before it
        assert seen["all"] == sorted(seen["all"]) or len(seen["all"]) - len(set(seen["all"])) < 64
    finally:
        c.channel.close()


def test_a_small_window_backlog_and_lagging_subscribers_read_disk_and_miss_nothing(start_server):
    """With a window of 4 transactions, a subscriber starting 60 back reads disk, then the feed;
    concurrent saves push it out of the window again and again (lagging): it still gets every
    transaction once, in order."""
    srv = start_server(args=["--feed-window-transactions", "4"])
    c = Client(make_channel(srv.address))
    w = Client(make_channel(srv.address))
    try:
        sid = c.open(model=person_model())
        start = c.current(sid).token
        for i in range(60):
            c.insert_people(sid, people(1, f"b{i}"))
        s = subscribe(c.channel, sid, filter=ch.ChangeFilter(include_values=True), **{"from": ch.StartPoint(token=start)})
        acked = []

        def write():
            for i in range(80):
                acked.append(w.insert_people(sid, people(1, f"l{i}")))
        t = threading.Thread(target=write)
        t.start()
        t.join(120)
        end = c.current(sid).generation
        got = s.transactions_through(end)
        first = int.from_bytes(start[25:], "big")
        assert [x.generation for x in got] == list(range(first + 1, end + 1))
        assert [key(x) for x in got] == [key(x) for x in history(c, sid, start, include_values=True)]
        s.cancel()
    finally:
        c.channel.close(); w.channel.close()
