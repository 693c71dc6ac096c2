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
