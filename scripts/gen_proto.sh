#!/usr/bin/env bash
# Regenerate capture/zk_proto/*_pb2.py from the project's .proto files with the protoc that
# grpcio-tools bundles (a dev dependency pinned in pyproject.toml; its protoc matches the
# protobuf runtime's major version). The generated files are committed: the package needs no
# compiler at install or run time.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m grpc_tools.protoc -I capture/zk_proto --python_out=capture/zk_proto \
  capture/zk_proto/bookkeeper_metadata.proto capture/zk_proto/managed_ledger.proto
