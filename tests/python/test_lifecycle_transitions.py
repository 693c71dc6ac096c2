"""Store transitions against a real ubiquityd (docs/lifecycle.md): sign-out announced on the change
feed before and after, the contexts' chance to save, durable events replayed on resume, and
key-value streams ending with their session.

Channels are raw on purpose (as in test_accounts.py): each call carries exactly the session under
test, and two sessions of one account stand for two devices.
"""

from __future__ import annotations

import grpc

from test_accounts import Tenant, bearer, failure, raw, reason_of, resume_details  # noqa: F401 (raw: fixture)
from ubiquity.v1 import accounts_pb2 as ac, changes_pb2 as ch, keyvalue_pb2 as kv, keyvalue_pb2_grpc as kvg


# -- key-value streams end with their session ----------------------------------------------------------

def _kv_stream(t: Tenant, channel, token: str):
    stream = t.changes.Subscribe(ch.SubscribeRequest(key_values=ch.KeyValueSubscription(), **{"from": ch.StartPoint(now=True)}),
                                 metadata=bearer(token), timeout=60)
    first = next(stream)
    assert first.HasField("caught_up")
    return stream, first


def test_sign_out_ends_the_sessions_key_value_streams_with_their_resume_token(start_server, raw):
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
    e = failure(lambda: list(mine))
    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED"), e
    d = resume_details(e)
    assert d is not None and d.resume_token == got.resume_token, "the last token sent, to resume from"

    # the other device's stream goes on
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
