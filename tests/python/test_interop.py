"""gRPC interop cases (grpc/doc/interop-test-descriptions.md) against ubiquityd's
test-only grpc.testing.TestService (--enable-interop-testing), with Python grpcio.

Each test is named after the interop case it implements.
"""

from __future__ import annotations

import threading

import grpc
import pytest

from conftest import get_stats
from ubiq_gen.grpc.testing import empty_pb2, messages_pb2, test_pb2_grpc
from ubiq_harness import wait_until

CALL_TIMEOUT = 20


@pytest.fixture(scope="module")
def stub(channel):
    return test_pb2_grpc.TestServiceStub(channel)


def payload(size: int) -> messages_pb2.Payload:
    return messages_pb2.Payload(body=b"\0" * size)


def open_streams(channel) -> int:
    # Whether the GetServerStats call counts itself is the server's business: tests
    # compare against a baseline taken the same way while nothing else runs.
    return get_stats(channel).open_streams


def wait_open_streams_back_to(channel, baseline: int, timeout=10):
    """The server has released the test's stream (no leaked stream state)."""
    wait_until(lambda: open_streams(channel) <= baseline, timeout,
               message=f"the server to release the call's stream (open_streams <= {baseline})")


def test_empty_unary(stub):
    resp, call = stub.EmptyCall.with_call(empty_pb2.Empty(), timeout=CALL_TIMEOUT)
    assert resp == empty_pb2.Empty()
    assert call.code() == grpc.StatusCode.OK


def test_large_unary(stub):
    req = messages_pb2.SimpleRequest(response_size=314159, payload=payload(271828))
    resp = stub.UnaryCall(req, timeout=CALL_TIMEOUT)
    assert len(resp.payload.body) == 314159
    assert resp.payload.body == b"\0" * 314159


def test_client_streaming(stub):
    sizes = [27182, 8, 1828, 45904]
    reqs = (messages_pb2.StreamingInputCallRequest(payload=payload(n)) for n in sizes)
    resp = stub.StreamingInputCall(reqs, timeout=CALL_TIMEOUT)
    assert resp.aggregated_payload_size == 74922


def test_server_streaming(stub):
    sizes = [31415, 9, 2653, 58979]
    req = messages_pb2.StreamingOutputCallRequest(
        response_parameters=[messages_pb2.ResponseParameters(size=n) for n in sizes])
    call = stub.StreamingOutputCall(req, timeout=CALL_TIMEOUT)
    got = [len(r.payload.body) for r in call]
    assert got == sizes
    assert call.code() == grpc.StatusCode.OK


class _Requests:
    """A request iterator the test feeds one message at a time (ping-pong)."""

    _DONE = object()

    def __init__(self):
        self._cond = threading.Condition()
        self._items: list = []

    def put(self, item):
        with self._cond:
            self._items.append(item)
            self._cond.notify()

    def close(self):
        self.put(self._DONE)

    def __iter__(self):
        return self

    def __next__(self):
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout=CALL_TIMEOUT):
                raise StopIteration
            item = self._items.pop(0)
        if item is self._DONE:
            raise StopIteration
        return item


def test_ping_pong(stub):
    request_sizes = [27182, 8, 1828, 45904]
    response_sizes = [31415, 9, 2653, 58979]
    requests = _Requests()
    call = stub.FullDuplexCall(requests, timeout=CALL_TIMEOUT)
    try:
        for req_size, resp_size in zip(request_sizes, response_sizes):
            requests.put(messages_pb2.StreamingOutputCallRequest(
                response_parameters=[messages_pb2.ResponseParameters(size=resp_size)],
                payload=payload(req_size)))
            resp = next(call)
            assert len(resp.payload.body) == resp_size
        requests.close()
        assert list(call) == []
        assert call.code() == grpc.StatusCode.OK
    finally:
        requests.close()
        call.cancel()


def test_empty_stream(stub):
    call = stub.FullDuplexCall(iter([]), timeout=CALL_TIMEOUT)
    assert list(call) == []
    assert call.code() == grpc.StatusCode.OK


ECHO_INITIAL = ("x-grpc-test-echo-initial", "test_initial_metadata_value")
ECHO_TRAILING = ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab")


def _assert_echoed(call):
    initial = dict(call.initial_metadata())
    trailing = dict(call.trailing_metadata())
    assert initial.get(ECHO_INITIAL[0]) == ECHO_INITIAL[1], initial
    assert trailing.get(ECHO_TRAILING[0]) == ECHO_TRAILING[1], trailing


def test_custom_metadata(stub):
    md = [ECHO_INITIAL, ECHO_TRAILING]
    # UnaryCall
    req = messages_pb2.SimpleRequest(response_size=314159, payload=payload(271828))
    resp, call = stub.UnaryCall.with_call(req, metadata=md, timeout=CALL_TIMEOUT)
    assert len(resp.payload.body) == 314159
    _assert_echoed(call)
    # FullDuplexCall
    req = messages_pb2.StreamingOutputCallRequest(
        response_parameters=[messages_pb2.ResponseParameters(size=314159)],
        payload=payload(271828))
    call = stub.FullDuplexCall(iter([req]), metadata=md, timeout=CALL_TIMEOUT)
    responses = list(call)
    assert [len(r.payload.body) for r in responses] == [314159]
    _assert_echoed(call)


def _status_case(stub, code: int, message: str):
    echo = messages_pb2.EchoStatus(code=code, message=message)
    # UnaryCall
    with pytest.raises(grpc.RpcError) as err:
        stub.UnaryCall(messages_pb2.SimpleRequest(response_status=echo), timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert err.value.details() == message
    # FullDuplexCall
    call = stub.FullDuplexCall(
        iter([messages_pb2.StreamingOutputCallRequest(response_status=echo)]),
        timeout=CALL_TIMEOUT)
    with pytest.raises(grpc.RpcError) as err:
        list(call)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert err.value.details() == message


def test_status_code_and_message(stub):
    _status_case(stub, 2, "test status message")


def test_special_status_message(stub):
    # Needs percent-encoding of grpc-message (whitespace, CR/LF, BMP and non-BMP).
    _status_case(stub, 2, "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n")


def test_unimplemented_method(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.UnimplementedCall(empty_pb2.Empty(), timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_unimplemented_service(channel):
    with pytest.raises(grpc.RpcError) as err:
        test_pb2_grpc.UnimplementedServiceStub(channel).UnimplementedCall(
            empty_pb2.Empty(), timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_cancel_after_begin(stub, channel):
    baseline = open_streams(channel)
    requests = _Requests()
    future = stub.StreamingInputCall.future(requests, timeout=CALL_TIMEOUT)
    # Cancel once the call is known to have started on the wire.
    wait_until(lambda: open_streams(channel) > baseline, 10,
               message="the server to see the StreamingInputCall stream")
    future.cancel()
    requests.close()
    with pytest.raises(grpc.FutureCancelledError):
        future.result(timeout=CALL_TIMEOUT)
    assert future.code() == grpc.StatusCode.CANCELLED
    wait_open_streams_back_to(channel, baseline)


def test_cancel_after_first_response(stub, channel):
    baseline = open_streams(channel)
    requests = _Requests()
    call = stub.FullDuplexCall(requests, timeout=CALL_TIMEOUT)
    requests.put(messages_pb2.StreamingOutputCallRequest(
        response_parameters=[messages_pb2.ResponseParameters(size=31415)],
        payload=payload(27182)))
    first = next(call)
    assert len(first.payload.body) == 31415
    call.cancel()
    requests.close()
    with pytest.raises(grpc.RpcError) as err:
        next(call)
    assert err.value.code() == grpc.StatusCode.CANCELLED
    wait_open_streams_back_to(channel, baseline)


def test_timeout_on_sleeping_server(stub, channel):
    baseline = open_streams(channel)
    requests = _Requests()
    call = stub.FullDuplexCall(requests, timeout=0.001)
    requests.put(messages_pb2.StreamingOutputCallRequest(payload=payload(27182)))
    with pytest.raises(grpc.RpcError) as err:
        next(call)
    requests.close()
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    wait_open_streams_back_to(channel, baseline)


def test_half_duplex_call(stub):
    # Not an interop-spec case, but TestService defines it: responses start only
    # after the client half-closes.
    sizes = [31415, 9, 2653]
    reqs = [messages_pb2.StreamingOutputCallRequest(
        response_parameters=[messages_pb2.ResponseParameters(size=n)]) for n in sizes]
    call = stub.HalfDuplexCall(iter(reqs), timeout=CALL_TIMEOUT)
    assert [len(r.payload.body) for r in call] == sizes
    assert call.code() == grpc.StatusCode.OK
