"""grpc.health.v1.Health and server reflection (v1alpha through grpcio-reflection's
ProtoReflectionDescriptorDatabase, v1 through a stub generated from grpc-proto)."""

from __future__ import annotations

import queue
import signal
import threading

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from conftest import EXIT_BOUND_SECONDS, make_channel
from ubiq_gen.grpc.reflection.v1 import reflection_pb2 as refl_v1
from ubiq_gen.grpc.reflection.v1 import reflection_pb2_grpc as refl_v1_grpc

CALL_TIMEOUT = 20
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

EXPECTED_SERVICES = {
    "ubiquity.v1.Admin",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.testing.TestService",
}


# -- health ------------------------------------------------------------------

@pytest.mark.parametrize("service", ["", "ubiquity.v1.Admin"])
def test_health_check_serving(channel, service):
    resp = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=CALL_TIMEOUT)
    assert resp.status == SERVING


def test_health_check_unknown_service_not_found(channel):
    with pytest.raises(grpc.RpcError) as err:
        health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=CALL_TIMEOUT)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_watch_serving(channel):
    call = health_pb2_grpc.HealthStub(channel).Watch(
        health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT)
    try:
        first = next(call)
        assert first.status == SERVING
    finally:
        call.cancel()


def _collect_watch(call, out: queue.Queue):
    try:
        for resp in call:
            out.put(("msg", resp.status))
        out.put(("end", call.code()))
    except grpc.RpcError as e:
        out.put(("end", e.code()))


@pytest.mark.parametrize("service", ["", "ubiquity.v1.Admin"])
def test_health_watch_not_serving_on_sigterm(start_server, service):
    srv = start_server(["--shutdown-grace-seconds", "3"])
    ch = make_channel(srv.address)
    try:
        call = health_pb2_grpc.HealthStub(ch).Watch(
            health_pb2.HealthCheckRequest(service=service), timeout=60)
        events: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_collect_watch, args=(call, events), daemon=True)
        reader.start()
        assert events.get(timeout=CALL_TIMEOUT) == ("msg", SERVING)
        srv.send_signal(signal.SIGTERM)
        seen = []
        while True:
            kind, value = events.get(timeout=EXIT_BOUND_SECONDS)
            seen.append((kind, value))
            if kind == "end":
                break
        assert ("msg", NOT_SERVING) in seen, f"Watch never reported NOT_SERVING: {seen}"
        assert seen.index(("msg", NOT_SERVING)) < len(seen) - 1
        rc = srv.wait(EXIT_BOUND_SECONDS)
        assert rc == 0, f"exit code {rc} after SIGTERM\n{srv.stderr_tail()}"
    finally:
        ch.close()


# -- reflection v1alpha (grpcio-reflection) ----------------------------------

def test_reflection_v1alpha_list_services(channel):
    db = ProtoReflectionDescriptorDatabase(channel)
    services = set(db.get_services())
    missing = EXPECTED_SERVICES - services
    assert not missing, f"reflection lacks {missing}; has {sorted(services)}"


def test_reflection_v1alpha_file_containing_symbol(channel):
    db = ProtoReflectionDescriptorDatabase(channel)
    pool = descriptor_pool.DescriptorPool(db)
    admin = pool.FindServiceByName("ubiquity.v1.Admin")
    ping = admin.FindMethodByName("Ping")
    assert ping.input_type.full_name == "ubiquity.v1.PingRequest"
    assert ping.output_type.full_name == "ubiquity.v1.PingResponse"
    assert [f.name for f in ping.input_type.fields] == ["payload"]
    # Dependencies resolve too (the embedded set has every proto with its imports).
    test_service = pool.FindServiceByName("grpc.testing.TestService")
    unary = test_service.FindMethodByName("UnaryCall")
    assert unary.input_type.fields_by_name["payload"].message_type.full_name == "grpc.testing.Payload"
    health = pool.FindServiceByName("grpc.health.v1.Health")
    assert {m.name for m in health.methods} >= {"Check", "Watch"}


def test_reflection_v1alpha_unknown_symbol(channel):
    db = ProtoReflectionDescriptorDatabase(channel)
    with pytest.raises(KeyError):
        db.FindFileContainingSymbol("no.such.Symbol")


# -- reflection v1 (raw stub) ------------------------------------------------

def _v1_exchange(channel, *requests):
    stub = refl_v1_grpc.ServerReflectionStub(channel)
    return list(stub.ServerReflectionInfo(iter(requests), timeout=CALL_TIMEOUT))


def test_reflection_v1_list_services(channel):
    [resp] = _v1_exchange(channel, refl_v1.ServerReflectionRequest(list_services=""))
    assert resp.WhichOneof("message_response") == "list_services_response", resp
    services = {s.name for s in resp.list_services_response.service}
    missing = EXPECTED_SERVICES - services
    assert not missing, f"reflection v1 lacks {missing}; has {sorted(services)}"


def test_reflection_v1_file_containing_symbol(channel):
    responses = _v1_exchange(
        channel,
        refl_v1.ServerReflectionRequest(file_containing_symbol="ubiquity.v1.Admin"),
        refl_v1.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
    )
    assert len(responses) == 2
    found, missing = responses
    assert found.WhichOneof("message_response") == "file_descriptor_response", found
    files = [descriptor_pb2.FileDescriptorProto.FromString(b)
             for b in found.file_descriptor_response.file_descriptor_proto]
    admin_files = [f for f in files if any(s.name == "Admin" for s in f.service)]
    assert admin_files, [f.name for f in files]
    assert admin_files[0].package == "ubiquity.v1"
    [admin_service] = [s for s in admin_files[0].service if s.name == "Admin"]
    methods = {m.name for m in admin_service.method}
    assert "Ping" in methods
    assert missing.WhichOneof("message_response") == "error_response"
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


def test_reflection_v1_file_by_filename_and_missing_extension(channel):
    responses = _v1_exchange(
        channel,
        refl_v1.ServerReflectionRequest(file_by_filename="ubiquity/v1/admin.proto"),
        refl_v1.ServerReflectionRequest(file_containing_extension=refl_v1.ExtensionRequest(
            containing_type="ubiquity.v1.PingRequest", extension_number=1000)),
    )
    assert len(responses) == 2
    by_name, extension = responses
    assert by_name.WhichOneof("message_response") == "file_descriptor_response", by_name
    names = [descriptor_pb2.FileDescriptorProto.FromString(b).name
             for b in by_name.file_descriptor_response.file_descriptor_proto]
    assert "ubiquity/v1/admin.proto" in names
    assert extension.WhichOneof("message_response") == "error_response"
    assert extension.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


def test_reflection_v1alpha_file_by_filename(channel):
    db = ProtoReflectionDescriptorDatabase(channel)
    fdp = db.FindFileByName("ubiquity/v1/admin.proto")
    assert fdp.package == "ubiquity.v1"
    assert any(s.name == "Admin" for s in fdp.service)
