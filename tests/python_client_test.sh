#!/usr/bin/env bash
# Runs tests/python_client_test.py with Debian's python3 (which has python3-grpcio and
# python3-protobuf), the package from client/python and its generated stubs.
set -euo pipefail
runfiles="${TEST_SRCDIR:-$(dirname "$0")/..}/shardwise"
PYTHONPATH="$runfiles/client/python" exec /usr/bin/python3 "$runfiles/tests/python_client_test.py" -v
