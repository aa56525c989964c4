#!/usr/bin/env bash
# Regenerate the *_pb2.py modules beside this script from the .proto files.
#
# Uses grpcio-tools 1.64 (protoc 26, Python gencode 5.26, the same gencode
# generation as opentelemetry-proto 1.45), in a throwaway virtual environment so
# the project's own protobuf runtime is left alone. The output needs protobuf
# >= 5.26 at run time. Run from anywhere: bash ingest/protocols/proto/generate.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
venv="$(mktemp -d)"
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q "grpcio-tools==1.64.1"
cd "$root"
"$venv/bin/python" -m grpc_tools.protoc -I . --python_out=. ingest/protocols/proto/*.proto
for module in ingest/protocols/proto/*_pb2.py; do
  { echo "# ruff: noqa"; cat "$module"; } > "$module.tmp" && mv "$module.tmp" "$module"
done
ruff format -q ingest/protocols/proto/
