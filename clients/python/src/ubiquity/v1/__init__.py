"""Generated protobuf and gRPC modules for ubiquity.v1 (clients/python/scripts/gen-stubs; do not edit them)."""
