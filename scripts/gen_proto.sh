#!/usr/bin/env bash
# Regenerate ingest/zk_proto/*_pb2.py from the project's .proto files with the protoc that
# grpcio-tools bundles (a dev dependency pinned in pyproject.toml; its protoc matches the
# protobuf runtime's major version). The generated files are committed: the package needs no
# compiler at install or run time.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m grpc_tools.protoc -I ingest/zk_proto --python_out=ingest/zk_proto \
  ingest/zk_proto/bookkeeper_metadata.proto ingest/zk_proto/managed_ledger.proto
