"""The change feed iterator: events in order, resume after a server restart, HISTORY_EXPIRED hook."""

from __future__ import annotations

from pathlib import Path

import ubiq_harness
import ubiquity
from conftest import person_model


def next_transaction(feed: ubiquity.ChangeFeed) -> ubiquity.Transaction:
    """The next committed transaction (skipping caught-up and progress events); bounded by the
    feed's reconnect limit and pytest's timeout, never by a sleep. Each event these tests wait
    for holds one transaction (one save each), so taking events one at a time loses none."""
    while True:
        event = next(feed)
        if event.transactions:
            assert len(event.transactions) == 1
            return event.transactions[0]


def test_feed_delivers_saves_in_order_with_values(store: ubiquity.Store) -> None:
    feed = store.changes(start="now", include_values=True)
    try:
        first = next(feed)
        assert first.kind == "caught_up"
        r1 = store.save(inserts={"a": ("Person", {"name": "Ann", "age": 30})}, author="tests")
        ann = r1.permanent_ids["a"]
        store.save(updates={ann: {"age": 31}})
        t1, t2 = next_transaction(feed), next_transaction(feed)
        assert (t1.generation, t2.generation) == (r1.generation, r1.generation + 1)
        assert t1.author == "tests"
        assert [(c.kind, c.object_id) for c in t1.changes] == [("insert", ann)]
        assert t2.changes[0].kind == "update" and t2.changes[0].values["age"] == 31
        assert feed.token == t2.token
    finally:
        feed.close()


def test_feed_resumes_from_its_last_token_after_a_server_restart(tmp_path: Path) -> None:
    binary = ubiq_harness.find_server_binary()
    first = ubiq_harness.Ubiquityd(binary, tmp_path, name="restart", interop=False).start()
    second = None
    try:
        with ubiquity.Client(first.address, api_key=first.api_key) as client:
            store = client.open_store("feed")
            store.register_model(person_model())
            feed = store.changes(start="now", reconnect_for=60)
            store.save(inserts={"a": ("Person", {"name": "Ann"})})
            before = next_transaction(feed)
            assert first.stop() == 0
            # Same data directory, same port: the client's channel reconnects to the new process.
            second = ubiq_harness.Ubiquityd(binary, tmp_path, name="restart", interop=False,
                                            port=first.port or 0).start()
            r = store.save(inserts={"b": ("Person", {"name": "Bob"})})
            after = next_transaction(feed)
            # Exactly the next transaction: nothing lost, nothing delivered twice.
            assert after.generation == before.generation + 1 == r.generation
            assert [c.object_id for c in after.changes] == [r.permanent_ids["b"]]
            assert feed.reconnects >= 1
            feed.close()
    finally:
        for d in (first, second):
            if d is not None and d.alive():
                d.kill()


def test_history_expired_calls_the_hook_which_rebaselines(store: ubiquity.Store) -> None:
    old = store.current_token()
    store.save(inserts={"a": ("Person", {"name": "Ann"})})
    trimmed_at = store.save(inserts={"b": ("Person", {"name": "Bob"})}).token
    store.delete_history(trimmed_at)
    seen: list[ubiquity.HistoryExpired] = []

    def rebaseline(err: ubiquity.HistoryExpired) -> bytes:
        seen.append(err)
        # A real cache would fetch everything at err.current_token here, then continue from it.
        assert len(store.fetch("Person", at=err.current_token)) == 2
        return err.current_token

    feed = store.changes(start=old, on_history_expired=rebaseline)
    try:
        # The refused subscribe calls the hook; the feed goes on from the baseline's token.
        assert next(feed).kind == "caught_up"
        r = store.save(inserts={"c": ("Person", {"name": "Cid"})})
        t = next_transaction(feed)
        assert t.generation == r.generation
        (err,) = seen
        assert err.reason == "HISTORY_EXPIRED" and err.current_token == trimmed_at
        assert err.oldest_retained_token
    finally:
        feed.close()


def test_history_expired_without_a_hook_ends_the_feed_with_the_error(store: ubiquity.Store) -> None:
    old = store.current_token()
    store.delete_history(store.save(inserts={"a": ("Person", {"name": "Ann"})}).token)
    feed = store.changes(start=old)
    try:
        next(feed)
        raise AssertionError("expected HistoryExpired")
    except ubiquity.HistoryExpired as e:
        assert e.current_token and isinstance(e.deletions_available, bool)
    finally:
        feed.close()
