"""Acknowledged StoresWillChange against a real ubiquityd (docs/lifecycle.md "Acknowledgements"):
a subscriber that opts in (`acknowledges_store_events`) gets an event token and a deadline with each
WILL_CHANGE, and the transition waits for its `AcknowledgeStoreEvent` — or for the deadline — before
the contexts' chance to save and the transition itself. Legacy subscribers are never waited for.

Channels are raw on purpose (as in test_lifecycle_transitions.py): each call carries exactly the
session under test, and two sessions of one account stand for two devices. Nothing here measures
time: a transition that waited for the wrong subscriber would outlive the caller's 60 s timeout
against a 600 s acknowledgement deadline, and what must wait is shown by the order of events.
"""

from __future__ import annotations

import grpc

from test_accounts import Tenant, bearer, failure, raw, reason_of  # noqa: F401 (raw: fixture)
from test_changes import Stream
from ubiq_client import cx, ob, st, v
from ubiquity.v1 import accounts_pb2 as ac, changes_pb2 as ch

WILL, DID = ch.StoreEvent.PHASE_WILL_CHANGE, ch.StoreEvent.PHASE_DID_CHANGE
# long enough that only acknowledgements (never the deadline) can let these transitions go on in time
PATIENT = ["--transition-ack-seconds", "600"]


def _subscribe(c, sid: str, session: str, acks: bool = True) -> Stream:
    s = Stream(c, ch.SubscribeRequest(store_id=sid, acknowledges_store_events=acks, **{"from": ch.StartPoint(now=True)}),
               metadata=bearer(session))
    assert s.next().HasField("caught_up")
    return s


def _will(s: Stream) -> ch.SubscribeResponse:
    m = s.next()
    assert m.HasField("store_event") and m.store_event.phase == WILL, m
    return m


def _ack(t: Tenant, session: str, token: bytes) -> bool:
    return t.changes.AcknowledgeStoreEvent(ch.AcknowledgeStoreEventRequest(event_token=token), metadata=bearer(session), timeout=30).awaited


def _generation(t: Tenant, sid: str, session: str) -> int:
    return t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=bearer(session), timeout=30).generation


def _ending(s: Stream) -> grpc.RpcError:
    e = s.ended.get(timeout=60)
    assert isinstance(e, grpc.RpcError), e
    return e


def test_sign_out_waits_until_every_opted_in_subscriber_of_the_device_acknowledged(start_server, raw):
    srv = start_server(PATIENT, name="acks-signout")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    notes, _ = t.store_with_data("notes")
    tasks, _ = t.store_with_data("tasks")
    one, two = t.token, t.sign_in("device-2")

    # device 1 follows both stores and acknowledges; device 2 acknowledges too, but a sign-out
    # concerns only the device that signs out; device 1's legacy subscriber is never waited for
    n1, t1, n2 = _subscribe(c, notes, one), _subscribe(c, tasks, one), _subscribe(c, notes, two)
    legacy = _subscribe(c, notes, one, acks=False)
    ctx = t.contexts.CreateContext(cx.CreateContextRequest(store_id=notes, name="idle"), metadata=bearer(one), timeout=30).context_id

    signed_out = t.accounts.SignOut.future(ac.SignOutRequest(), metadata=bearer(one), timeout=60)
    will_n, will_t = _will(n1), _will(t1)
    for w in (will_n, will_t):
        assert w.store_event.transition == ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED
        assert w.store_event.acknowledgement.event_token == w.resume_token, "the event's identity is its token"
        assert w.store_event.acknowledgement.HasField("deadline")
    plain = _will(legacy)
    assert not plain.store_event.HasField("acknowledgement") and plain.resume_token == will_n.resume_token

    # the transition waits: the session still works, its context is not reset (it had nothing to
    # save, so without the wait it would be at once), and a save lands between WILL and DID
    assert _ack(t, one, will_n.store_event.acknowledgement.event_token) is True
    assert _ack(t, one, will_n.store_event.acknowledgement.event_token) is False, "twice: a no-op"
    assert not signed_out.done(), "store tasks' subscriber has not acknowledged"
    assert not t.contexts.GetState(cx.ContextRequest(context_id=ctx), metadata=bearer(one), timeout=30).has_changes
    saved = t.stores.Save(st.SaveRequest(store_id=notes, inserts=[
        ob.Insert(temporary_id="x", entity="Person", values={"name": v("flushed")})]), metadata=bearer(one), timeout=30)

    assert _ack(t, one, will_t.store_event.acknowledgement.event_token) is True
    signed_out.result()  # within its 60 s: nobody else (device 2, the legacy subscriber) was waited for

    tx, did = n1.next(), n1.next()
    assert [x.generation for x in tx.transactions.transactions] == [saved.generation]
    assert did.store_event.phase == DID and not did.store_event.HasField("acknowledgement")
    assert will_n.resume_generation < saved.generation < did.resume_generation
    assert _ending(n1).code() == grpc.StatusCode.UNAUTHENTICATED
    assert [m.WhichOneof("event") for m in (legacy.next(), legacy.next())] == ["transactions", "store_event"]

    # then the context was reset (STORE_CHANGED to the device's next session)
    again = t.sign_in("device-1")
    e = failure(t.contexts.GetState, cx.ContextRequest(context_id=ctx), metadata=bearer(again), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.FAILED_PRECONDITION, "STORE_CHANGED"), e

    # device 2 never got the event: it saw the save only, and its stream goes on
    m = n2.next()
    assert m.HasField("transactions") and [x.generation for x in m.transactions.transactions] == [saved.generation]
    e = failure(_ack, t, two, will_n.store_event.acknowledgement.event_token)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.NOT_FOUND, "STORE_EVENT_NOT_FOUND"), "another device's event"
    # and a late acknowledgement by device 1's new session is a harmless no-op
    assert _ack(t, again, will_t.store_event.acknowledgement.event_token) is False
    for s in (t1, n2, legacy):
        s.cancel()


def test_delete_account_waits_for_both_devices(start_server, raw):
    srv = start_server(PATIENT, name="acks-delete")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, ids = t.store_with_data()
    one, two = t.token, t.sign_in("device-2")
    s1, s2 = _subscribe(c, sid, one), _subscribe(c, sid, two)

    deleting = t.accounts.DeleteAccount.future(ac.DeleteAccountRequest(account_id=t.account_id), metadata=t.ops, timeout=60)
    w1, w2 = _will(s1), _will(s2)
    assert w1.store_event.transition == w2.store_event.transition == ch.StoreEvent.TRANSITION_CONTENT_REMOVED
    assert w1.resume_token == w2.resume_token, "one event, every device"

    assert _ack(t, one, w1.store_event.acknowledgement.event_token) is True
    # device 2 has not acknowledged: nothing is deleted yet, its data still reads
    assert not deleting.done()
    got = t.stores.GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=ids), metadata=bearer(two), timeout=30)
    assert len(got.objects) == 2
    assert _ack(t, two, w2.store_event.acknowledgement.event_token) is True
    receipt = deleting.result()
    assert receipt.stores_removed == 1
    for s in (s1, s2):
        e = _ending(s)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e


def test_a_subscriber_that_disconnects_counts_as_acknowledged(start_server, raw):
    srv = start_server(PATIENT, name="acks-disconnect")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    # two sessions of one device: a sign-out names the device, so both get the event
    one, again = t.token, t.sign_in("device-1")
    stays, leaves = _subscribe(c, sid, one), _subscribe(c, sid, again)
    signed_out = t.accounts.SignOut.future(ac.SignOutRequest(), metadata=bearer(one), timeout=60)
    will, _ = _will(stays), _will(leaves)
    assert _ack(t, one, will.store_event.acknowledgement.event_token) is True
    assert not signed_out.done(), "the other session's subscriber has not acknowledged"
    leaves.cancel()  # it holds no work any more: the transition goes on without its acknowledgement
    signed_out.result()
    assert stays.next().store_event.phase == DID


def test_a_subscriber_that_never_acknowledges_holds_the_transition_only_until_the_deadline(start_server, raw):
    srv = start_server(["--transition-ack-seconds", "1"], name="acks-deadline")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    silent = _subscribe(c, sid, t.token)
    # it never acknowledges: SignOut still returns, WILL then DID in order
    t.accounts.SignOut(ac.SignOutRequest(), metadata=t.md, timeout=60)
    will, did = _will(silent), silent.next()
    assert did.store_event.phase == DID and will.resume_generation < did.resume_generation
    assert will.store_event.acknowledgement.deadline.seconds > 0
    assert _ending(silent).code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_legacy_subscriber_is_never_waited_for(start_server, raw):
    srv = start_server(PATIENT, name="acks-legacy")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    legacy = _subscribe(c, sid, t.token, acks=False)
    t.accounts.SignOut(ac.SignOutRequest(), metadata=t.md, timeout=60)  # not 600 s
    will, did = _will(legacy), legacy.next()
    assert not will.store_event.HasField("acknowledgement")
    assert did.store_event.phase == DID


def test_bad_acknowledgements_get_a_clear_status_and_change_nothing(start_server, raw):
    srv = start_server(["--transition-ack-seconds", "1"], name="acks-bad")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    other = Tenant(srv, c, "other")
    other_sid, _ = other.store_with_data()
    s = _subscribe(c, sid, t.token)
    t.accounts.SignOut(ac.SignOutRequest(), metadata=t.md, timeout=60)
    will, did = _will(s), s.next()
    token = will.store_event.acknowledgement.event_token
    t.token = t.sign_in("device-1")
    before = _generation(t, sid, t.token)

    # another account's event answers as an unknown store would
    e = failure(_ack, other, other.token, token)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.NOT_FOUND, "STORE_NOT_FOUND"), e
    # malformed, missing, from the future: INVALID_ARGUMENT
    for bad, reason in ((b"", "MISSING_FIELD"), (b"not a token", "BAD_TOKEN"), (token[:-1], "BAD_TOKEN")):
        e = failure(_ack, t, t.token, bad)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.INVALID_ARGUMENT, reason), (bad, e)
    future = t.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), metadata=t.md, timeout=30).token
    future = future[:-8] + (int.from_bytes(future[-8:], "big") + 5).to_bytes(8, "big")
    e = failure(_ack, t, t.token, future)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.INVALID_ARGUMENT, "BAD_TOKEN"), e
    # a token of something that is not a WILL_CHANGE: a DID_CHANGE, a transaction
    saved = t.stores.Save(st.SaveRequest(store_id=sid, inserts=[ob.Insert(temporary_id="x", entity="Person", values={"name": v("x")})]),
                          metadata=t.md, timeout=30)
    for not_a_will in (did.resume_token, saved.token):
        e = failure(_ack, t, t.token, not_a_will)
        assert (e.code(), reason_of(e)) == (grpc.StatusCode.NOT_FOUND, "STORE_EVENT_NOT_FOUND"), e
    # without a session
    e = failure(t.changes.AcknowledgeStoreEvent, ch.AcknowledgeStoreEventRequest(event_token=token), timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "MISSING_CREDENTIALS"), e
    # a key-value subscription cannot opt in
    e = failure(t.changes.Subscribe, ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), acknowledges_store_events=True),
                metadata=t.md, timeout=30)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"), e

    # nothing changed (the one save above aside) and the server serves; the real event's late
    # acknowledgement is a no-op
    assert _generation(t, sid, t.token) == before + 1
    assert _generation(other, other_sid, other.token) > 0
    assert _ack(t, t.token, token) is False


def test_a_sign_out_whose_caller_gave_up_still_completes(start_server, raw):
    # A caller that cancels (or whose deadline passes) while the sign-out waits used to cancel the
    # transition's own work: its DID_CHANGE failed to write ("request cancelled") and the WILL_CHANGE
    # stayed open until the next start. Once begun, a transition runs to its end.
    srv = start_server(PATIENT, name="acks-caller-gone")
    c = raw(srv)
    t = Tenant(srv, c, "t")
    sid, _ = t.store_with_data()
    one = t.token
    s = _subscribe(c, sid, one)
    signing_out = t.accounts.SignOut.future(ac.SignOutRequest(), metadata=bearer(one), timeout=60)
    will = _will(s)
    assert signing_out.cancel(), "the call was still waiting for the acknowledgement"
    assert _ack(t, one, will.store_event.acknowledgement.event_token) is True, "the transition still waits for it"
    did = s.next()
    assert did.HasField("store_event") and did.store_event.phase == DID and not did.store_event.cancelled, did
    e = _ending(s)
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    e = failure(t.stores.CurrentGeneration, st.CurrentGenerationRequest(store_id=sid), metadata=bearer(one), timeout=30)
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED, "the sign-out completed: the session is gone"
