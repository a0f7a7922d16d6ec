#!/usr/bin/env bash
# The daemons from a relocatable bundle (//:bundle, built with --config=cuda) on a GPU
# host: a coordinator and two CUDA workers sharing GPU 0 run real CUDA jobs, then a job is
# cancelled mid-collective and a worker is killed mid-collective, and no worker may stay
# stuck; last, a fault-tolerant job (host-staged Gloo) loses a worker and ends whole. For
# GPU hosts (no GPU in CI); see docs/operations.md, "GPU checks".
#
# usage: tests/gpu/cluster_check.sh BUNDLE_DIR   (the unpacked bundle: bin/, lib/)
set -uo pipefail
bundle=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cli="$bundle/bin/shardwise"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
failures=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}

"$bundle/bin/shardwise-coordinator" --address=127.0.0.1:0 --port_file="$work/port" \
  --state_file="$work/state.db" --allowed_input_paths="$work" --allowed_output_paths="$work" \
  2>"$work/coordinator.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
if [ ! -s "$work/port" ]; then
  echo "FAIL the coordinator did not start:"
  cat "$work/coordinator.log"
  exit 1
fi
SHARDWISE_COORDINATOR="127.0.0.1:$(cat "$work/port")"
export SHARDWISE_COORDINATOR

start_worker() {  # start_worker NAME: a CUDA worker on GPU 0; its pid in $worker_pid
  "$bundle/bin/shardwise-worker" --device=cuda --gpu=0 --name="$1" 2>"$work/$1.log" &
  worker_pid=$!
  pids+=("$worker_pid")
}
start_worker gpu-a
start_worker gpu-b
pid_b=$worker_pid
idle_workers() { "$cli" get workers 2>/dev/null | grep -c IDLE; }
wait_idle() {  # wait_idle N SECONDS
  for _ in $(seq $(($2 * 10))); do [ "$(idle_workers)" -ge "$1" ] && return 0; sleep 0.1; done
  return 1
}
check "two CUDA workers register with their GPU" wait_idle 2 30
"$cli" get workers
if [ "$failures" -gt 0 ]; then
  tail -n 20 "$work"/*.log
  exit 1
fi

spec() {  # spec NAME WORLD COLLECTIVES STEPS
  sed -e "s/^name: .*/name: $1/" -e "s/^world_size: .*/world_size: $2/" \
    -e "s/collectives: .*/collectives: $3/" -e "s/^steps: .*/steps: $4/" \
    -e "s|final_model_path: .*|final_model_path: $work/$1.safetensors|" \
    "$here/../../examples/cuda.yaml" >"$work/$1.yaml"
  echo "$work/$1.yaml"
}
job_state() { "$cli" describe "$1" 2>/dev/null | awk '/^State:/ {print $2; exit}'; }
wait_state() {  # wait_state JOB STATE SECONDS
  for _ in $(seq $(($3 * 10))); do [ "$(job_state "$1")" = "$2" ] && return 0; sleep 0.1; done
  return 1
}
wait_step() {  # wait_step JOB STEP SECONDS: until the job reports at least STEP
  for _ in $(seq $(($3 * 10))); do
    local step
    step=$("$cli" describe "$1" 2>/dev/null | awk '/^Progress:/ {split($2, s, "/"); print s[1]; exit}')
    [ -n "$step" ] && [ "$step" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

nccl=$("$cli" submit "$(spec nccl-world1 1 NCCL 200)")
check "NCCL job at world size 1 succeeds" wait_state "$nccl" SUCCEEDED 120
"$cli" describe "$nccl" | grep -E "^(State|Progress|Reason)"
staged=$("$cli" submit "$(spec staged-world2 2 HOST_STAGED_GLOO 200)")
check "host-staged Gloo job with 2 ranks on one GPU succeeds" wait_state "$staged" SUCCEEDED 180
"$cli" describe "$staged" | grep -E "^(State|Progress|Reason)"

long=$("$cli" submit "$(spec cancelled 2 HOST_STAGED_GLOO 1000000)")
check "a long job runs" wait_step "$long" 20 120
"$cli" cancel "$long" >/dev/null
check "cancelled mid-collective: both workers idle within 60 s" wait_idle 2 60

killed=$("$cli" submit "$(spec killed 2 HOST_STAGED_GLOO 1000000)")
check "another long job runs" wait_step "$killed" 20 120
kill -9 "$pid_b"
check "a worker killed mid-collective: the other is idle within 90 s" wait_idle 1 90
"$cli" describe "$killed" | grep -E "^(State|Reason)"
"$cli" get workers

# Fault tolerance over host-staged Gloo: HYBRID_SHARD in two groups of two on four
# workers and a spare; a worker of a group killed mid-training takes its group out, the
# other trains on, a replacement heals in from it, and the job ends in its first attempt.
for name in gpu-c gpu-d gpu-e gpu-f; do
  start_worker "$name"
  [ "$name" = gpu-c ] && pid_c=$worker_pid
done
check "five CUDA workers idle" wait_idle 5 60
spec tolerant 4 HOST_STAGED_GLOO 4000 >/dev/null
sed -i -e 's/sharding_strategy: FULL_SHARD/sharding_strategy: HYBRID_SHARD\n  shard_group_size: 2/' \
  "$work/tolerant.yaml"
echo "fault_tolerance: {peer_timeout_seconds: 5}" >>"$work/tolerant.yaml"
tolerant=$("$cli" submit "$work/tolerant.yaml")
check "a fault-tolerant job runs" wait_step "$tolerant" 100 120
kill -9 "$pid_c"
check "a worker killed: the job succeeds" wait_state "$tolerant" SUCCEEDED 300
"$cli" describe "$tolerant" | grep -E "^(State|Progress|Attempt|Replicas)|epoch"
attempt_one() { "$cli" describe "$tolerant" | grep -qE '^Attempt: +1 '; }
check "... in its first attempt" attempt_one
healed() { "$cli" describe "$tolerant" | grep -qE 'epoch 2 from step [0-9]+: ranks 0, 1, 2, 3'; }
check "... whole again after a replacement healed in" healed

echo "$failures failed"
[ "$failures" -eq 0 ]
