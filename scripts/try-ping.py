"""First-use walkthrough: reflection, health and Admin.Ping against a running ubiquityd.

Usage: .venv-test/bin/python scripts/try-ping.py [HOST:PORT]   (default 127.0.0.1:50051)
Uses only stock grpcio packages; the Admin stubs are built at run time through reflection.
"""
import sys

import grpc
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

address = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
channel = grpc.insecure_channel(address)

db = ProtoReflectionDescriptorDatabase(channel)
print("services:", ", ".join(db.get_services()))

health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
print("health:", health_pb2.HealthCheckResponse.ServingStatus.Name(health.status))

pool = descriptor_pool.DescriptorPool(db)
Ping = message_factory.GetMessageClass(pool.FindMessageTypeByName("ubiquity.v1.PingRequest"))
Pong = message_factory.GetMessageClass(pool.FindMessageTypeByName("ubiquity.v1.PingResponse"))
ping = channel.unary_unary("/ubiquity.v1.Admin/Ping", request_serializer=Ping.SerializeToString,
                           response_deserializer=Pong.FromString)
reply = ping(Ping(payload=b"hello, ubiquity"), timeout=5)
print("ping:", reply.payload.decode(), "server time (µs):", reply.server_time_micros)

StatsReq = message_factory.GetMessageClass(pool.FindMessageTypeByName("ubiquity.v1.GetServerStatsRequest"))
Stats = message_factory.GetMessageClass(pool.FindMessageTypeByName("ubiquity.v1.ServerStats"))
stats = channel.unary_unary("/ubiquity.v1.Admin/GetServerStats", request_serializer=StatsReq.SerializeToString,
                            response_deserializer=Stats.FromString)(StatsReq(), timeout=5)
print("stats:", str(stats).replace("\n", " "))
