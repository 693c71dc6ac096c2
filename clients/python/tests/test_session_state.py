"""The session's rules without a server (session.SessionState is plain state): who signs in, who
waits, what is sent, in each ordering of renewal, sign-out and re-sign-in that could deadlock or
send a stale token. The clients only make the calls these steps name, outside their lock."""

from __future__ import annotations

from ubiquity.session import REFRESH_MARGIN_SECONDS, SessionState, Step
from ubiquity.v1 import accounts_pb2 as ac

NOW = 1_000_000.0


def signed_in(state: SessionState, token: str, lifetime: float = 3600) -> None:
    state.signed_in(ac.SignInResponse(session_token=token, account_id="acct",
                                      expires_at_micros=int((NOW + lifetime) * 1e6)))


def fresh(token: str = "t1") -> SessionState:
    state = SessionState("ubk_key", "device")
    assert state.next_step(NOW) is Step.SIGN_IN
    signed_in(state, token)
    return state


def sent(state: SessionState) -> str:
    return state.sendable()[0][1]


def test_the_first_callers_share_one_sign_in() -> None:
    state = SessionState("ubk_key", "device")
    assert state.next_step(NOW) is Step.SIGN_IN
    assert state.next_step(NOW) is Step.WAIT  # no token yet: wait for the one signing in
    signed_in(state, "t1")
    assert state.next_step(NOW) is Step.SEND and sent(state) == "Bearer t1"


def test_a_failed_sign_in_lets_the_next_caller_try() -> None:
    state = SessionState("ubk_key", "device")
    assert state.next_step(NOW) is Step.SIGN_IN
    state.sign_in_failed()
    assert state.next_step(NOW) is Step.SIGN_IN


def test_a_renewal_before_expiry_blocks_nobody() -> None:
    state = fresh()
    due = NOW + 3600 - REFRESH_MARGIN_SECONDS + 1  # inside the margin, before the expiry
    assert state.next_step(due) is Step.SIGN_IN
    # meanwhile the old token is still good: others send it rather than wait
    assert state.next_step(due) is Step.SEND and sent(state) == "Bearer t1"
    signed_in(state, "t2")
    assert sent(state) == "Bearer t2"


def test_after_expiry_callers_wait_for_the_renewal() -> None:
    state = fresh()
    late = NOW + 3600 + 1
    assert state.next_step(late) is Step.SIGN_IN
    assert state.next_step(late) is Step.WAIT


def test_calls_during_a_sign_out_send_the_ending_session() -> None:
    # The server waits for the acknowledgements and contexts' saves of the session it ends: they
    # must neither wait for the sign-out (deadlock) nor sign in anew (the server would not count them).
    state = fresh()
    assert state.begin_sign_out() == "t1"
    assert state.next_step(NOW) is Step.SEND and sent(state) == "Bearer t1"
    # not renewed while it ends, even when due
    assert state.next_step(NOW + 3600) is Step.SEND and sent(state) == "Bearer t1"
    state.signed_out()
    assert state.next_step(NOW) is Step.SIGN_IN  # after the sign-out: a new session


def test_a_sign_out_waits_for_a_sign_in_in_flight_and_ends_what_it_made() -> None:
    state = fresh()
    due = NOW + 3600 - REFRESH_MARGIN_SECONDS + 1
    assert state.next_step(due) is Step.SIGN_IN  # a renewal in flight
    assert state.begin_sign_out() is None  # wait: ending t1 would leave the renewal's session alive
    signed_in(state, "t2")
    assert state.begin_sign_out() == "t2"
    state.signed_out()
    assert state.token == "" and state.next_step(NOW) is Step.SIGN_IN


def test_a_sign_in_during_a_sign_out_waits_and_then_signs_in_anew() -> None:
    state = fresh()
    assert state.begin_sign_out() == "t1"
    assert state.next_step(NOW, explicit_sign_in=True) is Step.WAIT
    state.signed_out()
    assert state.next_step(NOW, explicit_sign_in=True) is Step.SIGN_IN
    signed_in(state, "t2")
    assert state.next_step(NOW) is Step.SEND and sent(state) == "Bearer t2"


def test_a_second_sign_out_waits_for_the_first_and_then_has_nothing_to_end() -> None:
    state = fresh()
    assert state.begin_sign_out() == "t1"
    assert state.begin_sign_out() is None
    state.signed_out()
    assert state.begin_sign_out() == ""
    state.signed_out()


def test_once_a_stream_saw_the_ending_session_revoked_calls_wait_for_the_sign_out() -> None:
    # A feed that resubscribes after SESSION_REVOKED must not resend the revoked token in a loop.
    state = fresh()
    assert state.begin_sign_out() == "t1"
    state.forget("Bearer t1")
    assert state.next_step(NOW) is Step.WAIT
    state.signed_out()
    assert state.next_step(NOW) is Step.SIGN_IN


def test_forgetting_a_replaced_session_keeps_the_current_one() -> None:
    state = fresh()
    state.forget("Bearer t0")  # a stream of an older session ended
    assert state.next_step(NOW) is Step.SEND and sent(state) == "Bearer t1"
    state.forget("Bearer t1")
    assert state.next_step(NOW) is Step.SIGN_IN
