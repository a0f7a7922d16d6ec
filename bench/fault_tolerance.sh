#!/usr/bin/env bash
# Fault tolerance's cost in the steady state, appended with this command to
# bench/RESULTS.md: the commit vote (one 1-float all-reduce before each optimizer step)
# as a share of the step of the GPT benchmark model (bench/gpt_bench.cc: 4 layers, 256
# wide, 128 context), NO_SHARD at world 2 with and without fault_tolerance, taking turns
# three times in one run.
# `recovery` instead: a worker killed (SIGKILL) mid-job on real daemons, handled by fault
# tolerance and, in the same run, by today's checkpoint restart (bench/recovery_bench.cc):
# detection, rebuild, time until training is past the step of the kill, steps computed
# again, and the throughput while degraded.
# `heal`: a replica group lost and healed live from the live ranks' shards
# (bench/heal_bench.cc): detection, placement, connect, each shard's transfer against raw
# Gloo and memcpy of the same bytes, catch-up, and what the heal costs the live groups.
# Usage: bench/fault_tolerance.sh [WARMUP_STEPS] [TIMED_STEPS]   (defaults 3 30)
#        bench/fault_tolerance.sh recovery [KILL_AT_STEP]         (default 80)
#        bench/fault_tolerance.sh heal [KILL_AT_STEP]             (default 80)
set -euo pipefail
cd "$(dirname "$0")/.."

./dev.sh deps
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Runs bench/$1 (a binary that starts a coordinator and workers and kills one past step
# $2) and appends its table, under $3 (the section's title) and $4 (the table's header),
# to bench/RESULTS.md.
run_kill_bench() {
  local binary=$1 kill_at=$2 title=$3 header=$4 mode=$5
  bazel build "//bench:$binary" //server:shardwise-coordinator //worker:shardwise-worker \
    >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  local bin dir rows
  bin=$(bazel info bazel-bin 2>/dev/null)
  dir=$(mktemp -d -t "shardwise-$mode.XXXXXX")
  echo "== $title, killed past step $kill_at (logs in $dir)" >&2
  rows=$("$bin/bench/$binary" --coordinator_binary="$bin/server/shardwise-coordinator" \
    --worker_binary="$bin/worker/shardwise-worker" --dir="$dir" --kill_at="$kill_at")
  echo "$header"
  echo "$rows"
  {
    echo
    echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): $title"
    echo
    echo "Command: \`bench/fault_tolerance.sh $mode $kill_at\`"
    echo
    echo "$header"
    echo "$rows"
  } >>bench/RESULTS.md
}

if [ "${1:-}" = recovery ]; then
  run_kill_bench recovery_bench "${2:-80}" \
    "a lost worker, fault tolerance against a checkpoint restart" \
    "| GPT bench model, NO_SHARD, world 2 | killed past step | detection | rebuild | kill to past its step | steps computed again | tokens/s degraded / before |
| --- | --- | --- | --- | --- | --- | --- |" recovery
  exit 0
fi

if [ "${1:-}" = heal ]; then
  run_kill_bench heal_bench "${2:-80}" "a lost replica group healed live" \
    "| GPT bench model, HYBRID_SHARD 2 groups x 2, AdamW | killed past step | detection | placement | connect | transfer per stream | all streams | raw Gloo, the same streams at once | memcpy, one stream | catch-up | the live groups: move; heal step; steps/s around it vs before | kill to whole again |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |" heal
  exit 0
fi

warmup=${1:-3}
steps=${2:-30}
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
