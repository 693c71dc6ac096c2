"""W0 anchor "what a user might write instead": Admin.Ping from Protos/ubiquity/v1/admin.proto,
served by Python grpcio the ordinary way (a thread pool of 8, as ANCHORS.md measured).

    python grpcio_ping_server.py STUB_DIR
STUB_DIR holds the modules grpc_tools.protoc generated from admin.proto. Listens on 127.0.0.1 on a
free port and prints "listening PORT" once serving; stops on SIGTERM.
"""

import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from ubiquity.v1 import admin_pb2, admin_pb2_grpc  # noqa: E402


class Admin(admin_pb2_grpc.AdminServicer):
    def Ping(self, request, context):
        return admin_pb2.PingResponse(payload=request.payload, server_time_micros=time.time_ns() // 1000)


def main() -> None:
    server = grpc.server(ThreadPoolExecutor(max_workers=8))
    admin_pb2_grpc.add_AdminServicer_to_server(Admin(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening {port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()


if __name__ == "__main__":
    main()
