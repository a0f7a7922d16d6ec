#!/usr/bin/env bash
# A Gloo world's bootstrap through the coordinator's rendezvous (bench/bootstrap_bench.cc):
# Gloo's own connectFullMesh, the baseline, against worker/comm/full_mesh's, each rank a
# thread with its own gRPC channel and Gloo TCP device, on loopback. Appends the table,
# with this command, to bench/RESULTS.md. What it shows is the bytes and calls through
# the coordinator (Gloo's grow as W^3 and W^2, full_mesh's as W^2 and W); the times on
# one host of 2 cores are the TCP connects of W(W-1) pairs, which neither changes.
# Usage: bench/bootstrap.sh [WORLDS]   (default 16,32,64,128)
set -euo pipefail
cd "$(dirname "$0")/.."

worlds=${1:-16,32,64,128}
./dev.sh deps
bazel build //bench:bootstrap_bench >/dev/null 2>&1
table=$("$(bazel info bazel-bin 2>/dev/null)/bench/bootstrap_bench" --worlds="$worlds")
echo "$table"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): a Gloo world's bootstrap through the rendezvous"
  echo
  echo "Command: \`bench/bootstrap.sh $worlds\`"
  echo
  echo "$table"
} >>bench/RESULTS.md
