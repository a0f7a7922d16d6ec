#!/usr/bin/env bash
# Fault tolerance's cost in the steady state, appended with this command to
# bench/RESULTS.md: the commit vote (one 1-float all-reduce before each optimizer step)
# as a share of the step of the GPT benchmark model (bench/gpt_bench.cc: 4 layers, 256
# wide, 128 context), NO_SHARD at world 2 with and without fault_tolerance, taking turns
# three times in one run. (The recovery itself, from a killed rank to the survivors
# training on, is measured by tests/fault_tolerance_test, whose workers log "step S
# failed (...); membership epoch E: N ranks train on from step S after T".)
# Usage: bench/fault_tolerance.sh [WARMUP_STEPS] [TIMED_STEPS]   (defaults 3 30)
set -euo pipefail
cd "$(dirname "$0")/.."
warmup=${1:-3}
steps=${2:-30}

./dev.sh deps
log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel build //bench:gpt_bench >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
bin=$(bazel info bazel-bin 2>/dev/null)
echo "== NO_SHARD with and without fault_tolerance, 3 turns ($warmup warm-up + $steps timed steps)" >&2
rows=$("$bin/bench/gpt_bench" "$warmup" "$steps" vote)
report=$(/usr/bin/python3 - "$rows" <<'PY'
import statistics
import sys

rows = [line.split() for line in sys.argv[1].splitlines() if line.startswith("throughput")]
plain = [float(v) for _, name, v in rows if name == "NO_SHARD"]
tolerant = [float(v) for _, name, v in rows if name == "NO_SHARD+fault_tolerance"]
ratios = sorted(t / p for p, t in zip(plain, tolerant))
print("| GPT bench model, world 2, NO_SHARD | tokens/s without, median | tokens/s with "
      "fault_tolerance, median | with / without, median | lowest-highest |")
print("| --- | --- | --- | --- | --- |")
print(f"| {len(ratios)} turns | {statistics.median(plain):.0f} | {statistics.median(tolerant):.0f} "
      f"| {statistics.median(ratios):.3f} | {ratios[0]:.3f}-{ratios[-1]:.3f} |")
PY
)
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): fault tolerance's commit vote"
  echo
  echo "Command: \`bench/fault_tolerance.sh $warmup $steps\`"
  echo
  echo "$report"
} >>bench/RESULTS.md
