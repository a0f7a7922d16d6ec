# Sourced by the GPU benchmarks (gpu_training.sh, gpu_gpt.sh): a coordinator and one CUDA
# worker on GPU 0 from the unpacked bundle in $bundle, on loopback, their state and logs in
# $work, stopped when the script exits (with whatever else the script adds to pids).
# Sets SHARDWISE_COORDINATOR for the CLI and defines watch_job. A script may set the array
# worker_wrapper first to start the worker under another program (gpu_gpt_profile.sh:
# Nsight Compute).

pids=()
[ -n "${worker_wrapper+set}" ] || worker_wrapper=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT

"$bundle/bin/shardwise-coordinator" --address=127.0.0.1:0 --port_file="$work/port" \
  --state_file="$work/state.db" --allowed_input_paths="$work" --allowed_output_paths="$work" \
  2>"$work/coordinator.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
export SHARDWISE_COORDINATOR="127.0.0.1:$(cat "$work/port")"
"${worker_wrapper[@]}" "$bundle/bin/shardwise-worker" --device=cuda --gpu=0 --name=bench-gpu0 \
  2>"$work/worker.log" &
pids+=($!)
for _ in $(seq 600); do "$bundle/bin/shardwise" get workers | grep -q IDLE && break; sleep 0.1; done
# A worker that never registered leaves every job pending until the caller's deadline: the
# logs say why now.
if ! "$bundle/bin/shardwise" get workers | grep -q IDLE; then
  echo "gpu_daemons.sh: no CUDA worker registered within 60 s" >&2
  tail -n 40 "$work/worker.log" "$work/coordinator.log" >&2
  exit 1
fi

# Waits for job $1 to end (SHARDWISE_JOB_TIMEOUT seconds at most, 480 by default). Where it
# did not succeed, prints the job's summary (its reason) and the daemons' last log lines,
# and fails: a benchmark's figure never hides its job's fault.
watch_job() {
  if timeout "${SHARDWISE_JOB_TIMEOUT:-480}" "$bundle/bin/shardwise" watch "$1" >"$work/watch.txt" 2>&1; then
    return 0
  fi
  echo "gpu_daemons.sh: job $1 did not succeed (or ran past ${SHARDWISE_JOB_TIMEOUT:-480} s):" >&2
  tail -n 20 "$work/watch.txt" >&2
  "$bundle/bin/shardwise" describe "$1" >&2 || true
  tail -n 60 "$work/worker.log" >&2
  tail -n 20 "$work/coordinator.log" >&2
  exit 1
}

# The steps/s `shardwise describe JOB` reports.
job_steps_per_second() {
  "$bundle/bin/shardwise" describe "$1" |
    awk '/^Progress:/ {for (i = 1; i < NF; i++) if ($(i + 1) == "steps/s,") print $i}'
}

# Job $1's memory as `shardwise describe` reports it: rank 0's caching allocator at its peak
# ("Peak:" line; the bytes allocated, as PyTorch's max_memory_allocated counts its own),
# and the estimate per rank the job was admitted with ("Memory:" line).
job_peak_allocated() {
  "$bundle/bin/shardwise" describe "$1" | sed -n 's/^Peak: *\(.*\) allocated,.*/\1/p'
}
job_memory_estimate() {
  "$bundle/bin/shardwise" describe "$1" | sed -n 's/^Memory: *about \([0-9.]* [A-Za-z]*\) .*/\1/p'
}
