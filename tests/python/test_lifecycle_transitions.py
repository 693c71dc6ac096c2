"""Store transitions against a real ubiquityd (docs/lifecycle.md): sign-out announced on the change
feed before and after, the contexts' chance to save, durable events replayed on resume, and
key-value streams ending with their session.

Channels are raw on purpose (as in test_accounts.py): each call carries exactly the session under
test, and two sessions of one account stand for two devices.
"""

from __future__ import annotations

import grpc

from test_accounts import Tenant, bearer, failure, raw, reason_of, resume_details  # noqa: F401 (raw: fixture)
from test_changes import Stream
from ubiq_client import cx, ob, st, v
from ubiquity.v1 import accounts_pb2 as ac, accounts_pb2_grpc as acg, changes_pb2 as ch, keyvalue_pb2 as kv, keyvalue_pb2_grpc as kvg


# -- key-value streams end with their session ----------------------------------------------------------

def _kv_stream(t: Tenant, channel, token: str):
    stream = t.changes.Subscribe(ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": ch.StartPoint(now=True)}),
                                 metadata=bearer(token), timeout=60)
    first = next(stream)
    assert first.HasField("caught_up")
    return stream, first


def test_sign_out_announces_itself_on_the_sessions_key_value_streams_then_ends_them(start_server, raw):
    srv = start_server(name="transitions-kv-signout")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    other = t.sign_in("device-2")
    mine, _ = _kv_stream(t, c, t.token)
    theirs, _ = _kv_stream(t, c, other)
    kvg.KeyValueStub(c).Set(kv.KeyValueSetRequest(key="k", value=b"1"), metadata=t.md, timeout=30)
    got = next(mine)
    assert got.key_value_change.key == "k"
    assert next(theirs).key_value_change.key == "k"

    t.accounts.SignOut(ac.SignOutRequest(), metadata=t.md, timeout=30)
    # the transition's events reach the device's key-value stream too, then it ends
    events = [next(mine), next(mine)]
    assert [(m.store_event.phase, m.store_event.transition) for m in events] == [
        (ch.StoreEvent.PHASE_WILL_CHANGE, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED),
        (ch.StoreEvent.PHASE_DID_CHANGE, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED)]
    e = failure(lambda: list(mine))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    d = resume_details(e)
    assert d is not None and d.resume_token == got.resume_token, "the last token sent, to resume from"

    # the other device's stream goes on, without the other device's events
    kvg.KeyValueStub(c).Set(kv.KeyValueSetRequest(key="k2", value=b"2"), metadata=bearer(other), timeout=30)
    assert next(theirs).key_value_change.key == "k2"
    theirs.cancel()


def test_an_expired_session_ends_its_key_value_stream(start_server, raw):
    srv = start_server(["--session-lifetime-seconds", "3", "--feed-progress-interval-ms", "100"], name="transitions-kv-expiry")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    stream, first = _kv_stream(t, c, t.token)
    # the stream ends by itself once the session expires: wait for that event, not for a time
    e = failure(lambda: list(stream))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_EXPIRED"), e
    d = resume_details(e)
    assert d is not None and d.resume_token == first.resume_token


# -- sign-out as a store transition -------------------------------------------------------------------

WILL, DID = ch.StoreEvent.PHASE_WILL_CHANGE, ch.StoreEvent.PHASE_DID_CHANGE


def _subscribe(c, sid: str, session: str, **start) -> Stream:
    start = start or {"now": True}
    return Stream(c, ch.SubscribeRequest(store_id=sid, **{"from": ch.StartPoint(**start)}), metadata=bearer(session))


def _ending(s: Stream) -> grpc.RpcError:
    e = s.ended.get(timeout=60)
    assert isinstance(e, grpc.RpcError), e
    return e


def _context_with_a_pending_insert(t: Tenant, sid: str, token: str, name: str) -> str:
    ctx = t.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name=name), metadata=bearer(token), timeout=30).context_id
    r = t.contexts.Insert(cx.ContextInsertRequest(context_id=ctx, inserts=[
        ob.Insert(temporary_id="n", entity="Person", values={"name": v(name)})]), metadata=bearer(token), timeout=30)
    assert r.state.has_changes
    return ctx


def _event(m) -> tuple[int, int]:
    assert m.HasField("store_event"), m
    return m.store_event.phase, m.store_event.transition


def test_sign_out_announces_the_transition_to_that_device_gives_its_context_a_chance_to_save_then_resets_it(start_server, raw):
    srv = start_server(name="transitions-signout")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    one, two = t.token, t.sign_in("device-2")

    # device 1 also had a subscriber that went away before the transition: it resumes later
    gone = _subscribe(c, sid, one)
    resume_from = gone.next().resume_token
    gone.cancel()

    sub1, sub2 = _subscribe(c, sid, one), _subscribe(c, sid, two)
    assert sub1.next().HasField("caught_up") and sub2.next().HasField("caught_up")
    ctx1 = _context_with_a_pending_insert(t, sid, one, "one")
    ctx2 = _context_with_a_pending_insert(t, sid, two, "two")

    signed_out = t.accounts.SignOut.future(ac.SignOutRequest(), metadata=bearer(one), timeout=60)
    will = sub1.next()
    assert _event(will) == (WILL, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED)
    # the chance to save: the context still works with the session, and its save is kept
    saved = t.contexts.Save(cx.ContextSaveRequest(context_id=ctx1), metadata=bearer(one), timeout=30)
    [saved_id] = saved.result.permanent_ids.values()
    tx = sub1.next()
    assert [ch_.object_id for x in tx.transactions.transactions for ch_ in x.changes] == [saved_id]
    did = sub1.next()
    assert _event(did) == (DID, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED)
    assert will.resume_generation < tx.resume_generation < did.resume_generation
    signed_out.result()
    # then the session is revoked: the stream ends after the DID_CHANGE, resumable from it
    e = _ending(sub1)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    assert resume_details(e).resume_token == did.resume_token

    got = t.stores.GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=[saved_id]), metadata=bearer(two), timeout=30)
    assert got.objects[0].values["name"].string_value == "one", "the change saved in the window is in the store"

    # device 1 signs in again: its old context was reset and says so until it is re-created
    again = t.sign_in("device-1")
    e = failure(t.contexts.GetState, cx.ContextRequest(context_id=ctx1), metadata=bearer(again), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_CHANGED"), e
    fresh = t.contexts.CreateContext(cx.CreateContextRequest(store_id=sid, name="fresh"), metadata=bearer(again), timeout=30)
    assert not fresh.has_changes

    # device 2 is untouched: its context still has its change and saves it; its subscriber got
    # device 1's saved transaction and no store event, then its own save
    assert t.contexts.GetState(cx.ContextRequest(context_id=ctx2), metadata=bearer(two), timeout=30).has_changes
    t.contexts.Save(cx.ContextSaveRequest(context_id=ctx2), metadata=bearer(two), timeout=30)
    seen = [sub2.next(), sub2.next()]
    assert not any(m.HasField("store_event") for m in seen), seen
    assert [x.context_name for m in seen for x in m.transactions.transactions] == ["one", "two"]
    sub2.cancel()

    # durable: the subscriber that was away replays the transition in order from its old token
    back = _subscribe(c, sid, again, token=resume_from)
    replay = [back.next() for _ in range(4)]
    assert _event(replay[0]) == (WILL, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED)
    assert [x.context_name for x in replay[1].transactions.transactions] == ["one"]
    assert _event(replay[2]) == (DID, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED)
    assert [x.context_name for x in replay[3].transactions.transactions] == ["two"]
    assert [m.resume_token for m in replay[:3]] == [will.resume_token, tx.resume_token, did.resume_token]
    back.cancel()


def test_a_context_that_does_not_save_in_time_is_reset_and_its_changes_dropped(start_server, raw):
    srv = start_server(["--transition-save-seconds", "1"], name="transitions-deadline")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    before = t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=t.md, timeout=30).generation
    ctx = _context_with_a_pending_insert(t, sid, t.token, "late")
    # the context never saves: the transition goes on at its deadline
    t.accounts.SignOut(ac.SignOutRequest(), metadata=t.md, timeout=60)
    t.token = t.sign_in("device-1")
    e = failure(t.contexts.GetState, cx.ContextRequest(context_id=ctx), metadata=t.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_CHANGED"), e
    # only the two events were written: the pending insert was dropped, not saved
    now = t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=t.md, timeout=30).generation
    assert now == before + 2, (before, now)
    people = t.stores.Fetch(st.FetchRequest(store_id=sid, fetch=ob.FetchSpec(entity="Person")), metadata=t.md, timeout=30)
    assert "late" not in [o.values["name"].string_value for o in people.objects]


def test_sign_out_without_a_live_session_is_unauthenticated_and_announces_nothing(start_server, raw):
    srv = start_server(name="transitions-bad")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    other = t.sign_in("device-2")
    sub = _subscribe(c, sid, other)
    assert sub.next().HasField("caught_up")
    ctx = _context_with_a_pending_insert(t, sid, t.token, "kept")
    before = t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=bearer(other), timeout=30).generation

    e = failure(t.accounts.SignOut, ac.SignOutRequest(), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "MISSING_CREDENTIALS"), e
    e = failure(t.accounts.SignOut, ac.SignOutRequest(), metadata=bearer("ubs_not-a-session"), timeout=30)
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
    # a revoked session: device 2 signs out (its own transition), then tries again
    t.accounts.SignOut(ac.SignOutRequest(), metadata=bearer(other), timeout=60)
    assert _event(sub.next())[0] == WILL and _event(sub.next())[0] == DID
    after_two = t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=t.md, timeout=30).generation
    e = failure(t.accounts.SignOut, ac.SignOutRequest(), metadata=bearer(other), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e

    # nothing changed: no event written, device 1's context keeps its change and still works
    assert after_two == before + 2
    assert t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=t.md, timeout=30).generation == after_two
    assert t.contexts.GetState(cx.ContextRequest(context_id=ctx), metadata=t.md, timeout=30).has_changes


def test_a_second_sign_out_of_the_same_session_while_the_first_runs_is_aborted_and_changes_nothing(start_server, raw):
    srv = start_server(name="transitions-twice")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    sub = _subscribe(c, sid, t.token)
    assert sub.next().HasField("caught_up")
    ctx = _context_with_a_pending_insert(t, sid, t.token, "pending")
    first = t.accounts.SignOut.future(ac.SignOutRequest(), metadata=t.md, timeout=60)
    will = sub.next()
    assert _event(will)[0] == WILL  # the first is in its chance to save: the context has changes

    e = failure(t.accounts.SignOut, ac.SignOutRequest(), metadata=t.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.ABORTED, "TRANSITION_IN_PROGRESS"), e

    t.contexts.Save(cx.ContextSaveRequest(context_id=ctx), metadata=t.md, timeout=30)
    first.result()
    rest = [sub.next(), sub.next()]
    assert rest[0].HasField("transactions") and _event(rest[1])[0] == DID, "one transition: no second WILL"
    assert _ending(sub).code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_device_that_followed_a_store_earlier_replays_its_sign_out_there_on_resume(start_server, raw):
    """Sign-out is written to every store of the account, not only where the session has a live
    subscriber or context: a device subscribed earlier, disconnected, and the session signed out
    from another connection; after signing in again it resumes from its old token and replays
    WILL_CHANGE then DID_CHANGE. Another device of the account sees none of it."""
    srv = start_server(name="transitions-signout-offline")
    c, elsewhere = raw(srv), raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    other_sid, _ = t.store_with_data("never-followed")
    two = t.sign_in("device-2")

    earlier = _subscribe(c, sid, t.token)
    resume_from = earlier.next().resume_token
    earlier.cancel()
    watcher = _subscribe(c, sid, two)
    assert watcher.next().HasField("caught_up")

    # the same session signs out through another connection: nothing of it is live anywhere
    acg.AccountsStub(elsewhere).SignOut(ac.SignOutRequest(), metadata=t.md, timeout=60)

    again = t.sign_in("device-1")
    back = _subscribe(c, sid, again, token=resume_from)
    got = back.caught_up()
    assert [_event(m) for m in got[:2]] == [(WILL, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED),
                                            (DID, ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED)], got
    assert not got[1].store_event.cancelled
    assert got[0].resume_generation < got[1].resume_generation
    assert got[2].HasField("caught_up"), got
    back.cancel()
    # every store of the account: the one it never followed holds the pair too
    since = t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=other_sid), metadata=bearer(again), timeout=30)
    assert since.generation >= 3, since  # its save, then WILL_CHANGE and DID_CHANGE

    # device 2 skipped both (its resume token moved past them) and its stream goes on
    t.stores.Save(st.SaveRequest(store_id=sid, inserts=[ob.Insert(temporary_id="n", entity="Person", values={"name": v("after")})]),
                  metadata=bearer(two), timeout=30)
    seen = watcher.until(lambda m: m.HasField("transactions"))
    assert not any(m.HasField("store_event") for m in seen), seen
    watcher.cancel()
