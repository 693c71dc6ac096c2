"""The feed's resume rules without a server (feed.Resumer is plain state)."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

import ubiquity
from ubiquity.feed import Resumer
from ubiquity.v1 import changes_pb2 as ch


def error(code: grpc.StatusCode, reason: str, *details: object) -> ubiquity.UbiquityError:
    packed = []
    for d in (error_details_pb2.ErrorInfo(reason=reason, domain="ubiquity.dev"), *details):
        a = any_pb2.Any()
        a.Pack(d)  # type: ignore[arg-type]
        packed.append(a)
    status = status_pb2.Status(code=code.value[0], message="m", details=packed)
    return ubiquity.errors.from_status(code, "m", [("grpc-status-details-bin", status.SerializeToString())])


def test_a_drained_stream_resumes_from_the_resume_details_token() -> None:
    r = Resumer("s", "oldest", ch.ChangeFilter(), reconnect_for=10)
    assert getattr(r.request(), "from").oldest
    r.received(ch.SubscribeResponse(resume_token=b"t1", caught_up=ch.CaughtUp()))
    delay = r.failed(error(grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", ch.ResumeDetails(resume_token=b"t2")), 0.0)
    assert delay > 0 and r.token == b"t2" and r.reconnects == 1
    assert getattr(r.request(), "from").token == b"t2"


def test_failures_back_off_and_give_up_after_reconnect_for() -> None:
    r = Resumer("s", b"t0", ch.ChangeFilter(), reconnect_for=5)
    unavailable = error(grpc.StatusCode.UNAVAILABLE, "")
    delays = [r.failed(unavailable, float(t)) for t in range(4)]
    assert delays == sorted(delays) and delays[0] < delays[-1] <= 1.0
    with pytest.raises(ubiquity.UnavailableError):
        r.failed(unavailable, 6.0)
    assert r.token == b"t0"


def test_history_expired_and_bad_requests_are_not_retried() -> None:
    r = Resumer("s", b"t0", ch.ChangeFilter(), reconnect_for=5)
    expired = error(grpc.StatusCode.FAILED_PRECONDITION, "HISTORY_EXPIRED",
                    ch.HistoryExpiredDetails(current_token=b"now", oldest_retained_token=b"old"))
    with pytest.raises(ubiquity.HistoryExpired) as e:
        r.failed(expired, 0.0)
    assert e.value.current_token == b"now" and e.value.oldest_retained_token == b"old"
    r.rebaselined(e.value, b"now")
    assert r.token == b"now"
    with pytest.raises(ubiquity.HistoryExpired):
        r.rebaselined(e.value, None)
    with pytest.raises(ubiquity.InvalidArgumentError):
        r.failed(error(grpc.StatusCode.INVALID_ARGUMENT, "BAD_TOKEN"), 0.0)


def test_a_revoked_session_resumes_only_a_feed_whose_client_signs_in_by_itself() -> None:
    revoked = error(grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED", ch.ResumeDetails(resume_token=b"did"))
    with pytest.raises(ubiquity.UnauthenticatedError):  # a local session's end: its store was imported
        Resumer("s", b"t0", ch.ChangeFilter(), reconnect_for=5).failed(revoked, 0.0)
    r = Resumer("s", b"t0", ch.ChangeFilter(), reconnect_for=5, renews_session=True)
    assert r.failed(revoked, 0.0) > 0 and r.token == b"did"  # on from the DID_CHANGE's token
    with pytest.raises(ubiquity.UnauthenticatedError):
        r.failed(error(grpc.StatusCode.UNAUTHENTICATED, "BAD_CREDENTIALS"), 0.0)


def test_a_key_value_feed_subscribes_to_the_accounts_key_values_from_its_token() -> None:
    r = Resumer("", b"k1", ch.ChangeFilter(), reconnect_for=5,
                key_values=ch.KeyValueSubscription(exclude_authors=["me"]))
    request = r.request()
    assert request.HasField("key_values") and not request.store_id and not request.HasField("filter")
    assert list(request.key_values.exclude_authors) == ["me"] and getattr(request, "from").token == b"k1"
    change = r.received(ch.SubscribeResponse(resume_token=b"k2", resume_generation=7, key_value_change=ch.KeyValueChange(
        reason=ch.KeyValueChange.REASON_SERVER_CHANGE, key="k", value=b"v", version=3))).key_value_change
    assert change == ubiquity.KeyValueChange(ubiquity.KeyValueChangeReason.SERVER_CHANGE, "k", b"v", 3, False, "",
                                             b"k2", 7)
    assert r.token == b"k2"


def test_store_events_are_typed_and_unknown_values_read_as_unspecified() -> None:
    r = Resumer("s", b"t0", ch.ChangeFilter(), reconnect_for=5)
    event = r.received(ch.SubscribeResponse(resume_token=b"t1", resume_generation=4, store_event=ch.StoreEvent(
        phase=ch.StoreEvent.PHASE_DID_CHANGE, transition=ch.StoreEvent.TRANSITION_INITIAL_IMPORT_COMPLETED,
        import_counts=ch.ImportCounts(inserted=2, merged=1))))
    assert event.kind == "store_event" and event.store_event == ubiquity.StoreEvent(
        ubiquity.Phase.DID_CHANGE, ubiquity.Transition.INITIAL_IMPORT_COMPLETED, False,
        ubiquity.ImportCounts(2, 1, 0), b"t1", 4)
    newer = r.received(ch.SubscribeResponse(store_event=ch.StoreEvent(phase=9, transition=42))).store_event
    assert newer is not None and (newer.phase, newer.transition, newer.import_counts) == (
        ubiquity.Phase.UNSPECIFIED, ubiquity.Transition.NONE, None)
