#!/usr/bin/env bash
# The GPU checks on a GPU host that has the CUDA toolkit (the device tool's machines), from
# the tarball tests/gpu/prepare_device_run.sh put in .device/:
#   tests    every GPU test binary (worker/cuda/*_test), then the GPT's parity test again
#            in synchronous mode (SHARDWISE_CUDA_SYNCHRONOUS=1: every operation finishes on
#            its stream before the next is issued), so a result that depends on stream
#            timing shows as a difference between the two runs
#   cluster  tests/gpu/cluster_check.sh: daemons, NCCL and host-staged jobs, cancel, kill
#   bench    bench/gpu_gpt.sh: GPT-2 124M against PyTorch, BF16 then FP32
#   fp32     bench/gpu_gpt.sh: GPT-2 124M against PyTorch, FP32 only
#   fused    bench/gpu_gpt.sh with FUSED attention, BF16, at the batch given and at 4x it
#            (what MATERIALIZED attention's T x T probabilities may not fit)
#   storage  bench/gpu_gpt.sh in BF16 with 16-bit storage (cuda.storage
#            STORAGE_PARAM_DTYPE), MATERIALIZED and FUSED, at the batch given
#   llama    bench/gpu_llama.sh: a Llama of Llama 3.2 1B's shape at context 2048 against
#            PyTorch, BF16 with FUSED attention, FP32 then 16-bit storage, at the batch
#            given (4 if not given)
#   owed     the figures issues 47 and 48 still owe, in one call: bench/gpu_gpt.sh in BF16
#            at the batch given, MATERIALIZED and FUSED in FP32 then 16-bit storage, and
#            FUSED with 16-bit storage at 4x the batch (PyTorch timed once per batch)
#   gelu     bench/gpu_gpt.sh in BF16, FUSED, 16-bit storage at the batch given, with
#            GELU_TANH on both sides: GELU in cuBLASLt's epilogue (issue 47) against the
#            owed phase's GELU run
#   atomic   bench/gpu_gpt.sh in BF16, FUSED, 16-bit storage with cuda.attention_backward
#            ATOMIC, at the batch given and at 4x it, against the owed phase's deterministic
#            runs (issue 48's default backward, by measurement)
#   busy     bench/gpu_gpt_busy.sh: the fraction of a BF16 step (MATERIALIZED, FP32 storage:
#            the defaults) the GPU is busy, from CUPTI's trace, Shardwise against PyTorch
#   profile  bench/gpu_gpt_profile.sh: the BF16 step's GPU time per kernel group (Nsight
#            Compute) against PyTorch eager's (its profiler), over STEPS steps (2 if not
#            given: every kernel runs alone under Nsight Compute)
# Each phase fits one 10-minute call: the script ends itself after DEVICE_RUN_DEADLINE
# seconds (560 by default; or at DEVICE_RUN_END, seconds since the epoch, to share one
# call's time among phases: DEVICE_RUN_END=$(($(date +%s) + 570)) for a 600-s call), its
# logs and summary kept, and a benchmark's job is given
# SHARDWISE_JOB_TIMEOUT seconds (240 by default here), so one hung job cannot take the
# whole call. The summary's first lines name the commit the kit was built from
# (prepare_device_run.sh). Logs go to $OUT (or /tmp/gpu-run) as one tarball
# (written when the script exits, however it ends), the lines the benchmarks append to
# bench/RESULTS.md as results-appended-PHASE.md (rewritten after each run, so a call cut
# short keeps the figures it finished), and the summary, line by line as each check ends,
# as summary-PHASE.txt. GPU_TEST_TIMEOUT (seconds, 240 by default: cuDNN compiles its
# attention engines at run time) bounds each test binary's run.
#
# usage: tests/gpu/device_run.sh tests|cluster|bench|fp32|fused|storage|llama|owed|gelu|atomic|busy|profile|all [STEPS] [BATCH]
set -uo pipefail
phase=${1:?usage: tests/gpu/device_run.sh tests|cluster|bench|fp32|fused|storage|llama|owed|gelu|atomic|busy|profile|all [STEPS] [BATCH]}
# Under its own deadline, once: the device tool's limit would kill the script without its
# logs, this one ends it with them (SIGTERM, below). DEVICE_RUN_END (seconds since the
# epoch) shares one deadline among several phases in one call.
if [ -z "${DEVICE_RUN_SECONDS:-}" ]; then
  DEVICE_RUN_SECONDS=${DEVICE_RUN_DEADLINE:-560}
  [ -z "${DEVICE_RUN_END:-}" ] || DEVICE_RUN_SECONDS=$((DEVICE_RUN_END - $(date +%s)))
  if [ "$DEVICE_RUN_SECONDS" -lt 30 ]; then
    echo "device_run.sh $phase: skipped, ${DEVICE_RUN_SECONDS} s left before DEVICE_RUN_END" >&2
    exit 124
  fi
  export DEVICE_RUN_SECONDS
  exec timeout -k 20 "$DEVICE_RUN_SECONDS" "$0" "$@"
fi
export SHARDWISE_JOB_TIMEOUT=${SHARDWISE_JOB_TIMEOUT:-240}
steps=${2:-30}
batch=${3:-8}
llama_batch=${3:-4}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/gpu-run}
logs=$(mktemp -d)
unpacked=$(mktemp -d)
mkdir -p "$out" "$unpacked/kit"
trap 'tar czf "$out/logs-$phase.tar.gz" -C "$logs" .' EXIT
# PyTorch's side of the benchmarks, timed once per model, precision, batch and step count
# while the machine stays up (bench/gpu_gpt.sh): a later call reuses what an earlier
# one timed.
SHARDWISE_TORCH_CACHE=${SHARDWISE_TORCH_CACHE:-/tmp/shardwise-torch-cache}
export SHARDWISE_TORCH_CACHE
mkdir -p "$SHARDWISE_TORCH_CACHE"
# What the benchmarks append to bench/RESULTS.md in this call starts after this line.
results_lines=$(wc -l <"$root/bench/RESULTS.md")
# One tarball (//tests/gpu:gpu_kit): the tests' and the daemons' folders are the same.
if [ ! -s "$root/.device/gpu-kit.tar.gz" ]; then
  echo "no .device/gpu-kit.tar.gz: run tests/gpu/prepare_device_run.sh and carry .device" >&2
  exit 2
fi
tar xzf "$root/.device/gpu-kit.tar.gz" -C "$unpacked/kit"
ln -s kit "$unpacked/tests"
ln -s kit "$unpacked/bundle"

# The toolkit's libraries as PyTorch loads them (the NVIDIA wheels: cuBLAS, NCCL, cudart,
# cuDNN), for the test binaries and PyTorch; /usr/local/cuda after them. The daemons
# link with an RPATH (not a RUNPATH) that names /usr/local/cuda/lib64
# (third_party/cuda/cuda_configure.bzl), searched before this path: a benchmark's worker
# loads the image's toolkit libraries where /usr/local/cuda has them.
wheels=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null)
export LD_LIBRARY_PATH="${wheels:+$wheels:}/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Each result line goes to the summary file as it comes, so a phase cut short by a
# deadline still reports what it finished.
record() { printf '%s\n' "$1" | tee -a "$out/summary-$phase.txt"; }
: >"$out/summary-$phase.txt"
# At the deadline the summary says so and the logs are kept: timeout signals its whole
# process group, so the running check ends too (the test binaries' own timeout runs in the
# foreground, in that group), and bash runs this trap once it has.
trap 'record "deadline: stopped after $DEVICE_RUN_SECONDS s"; exit 124' TERM
record "kit: $(cat "$root/.device/commit" 2>/dev/null || echo 'built from an unknown commit')"
nvidia-smi >"$logs/nvidia-smi.txt" 2>&1
record "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
# cuDNN may compile its fused attention engines at run time: whether NVRTC and cuDNN's
# runtime-compiled engines are there to load is a cuDNN refusal's first suspect.
runtime_compilers=$(
  IFS=:
  for dir in $LD_LIBRARY_PATH; do
    ls "$dir" 2>/dev/null | grep -E '^lib(nvrtc|cudnn_engines_runtime_compiled)\.so' | sed "s|^|$dir/|"
  done | tr '\n' ' '
)
# The cuDNN and NCCL the test binaries and PyTorch load (the wheels', first on
# LD_LIBRARY_PATH; the daemons' RPATH takes /usr/local/cuda's), which may be older than
# the toolkit's the kit was built against.
record "libraries: $(python3 -c 'import torch
v = torch.cuda.nccl.version()
print("PyTorch", torch.__version__, "cuDNN", torch.backends.cudnn.version(), "NCCL",
      ".".join(map(str, v)) if isinstance(v, tuple) else v)' 2>&1 | tail -1)"
record "runtime compilation: ${runtime_compilers:-no NVRTC or cuDNN runtime-compiled engines on LD_LIBRARY_PATH}"

# Runs one test binary (its log: LOG_NAME.log) and adds its counts to the summary.
run_test() {
  local binary=$1 log_name=$2 rc counts
  LD_LIBRARY_PATH="$unpacked/tests/lib:$LD_LIBRARY_PATH" timeout --foreground -k 10 "${GPU_TEST_TIMEOUT:-240}" \
    "$binary" >"$logs/$log_name.log" 2>&1
  rc=$?
  counts=$(grep -oE '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$logs/$log_name.log" |
    sed -E 's/^\[ +([A-Z]+) +\] /\1 /' | tr '\n' ' ')
  record "$log_name: rc $rc; $counts"
  # Why a test skipped (a cuDNN the host cannot run a case on, say), once per reason.
  grep -A1 ': Skipped$' "$logs/$log_name.log" | grep -vE ': Skipped$|^--$' | sort -u | head -5 |
    while read -r reason; do record "  skipped: $reason"; done
  # A failure's own words, in the output that comes back even when the logs do not.
  [ "$rc" -eq 0 ] || grep -E '^\[  FAILED  \]|Failure|error|Expected|Which is|actual' \
    "$logs/$log_name.log" | head -40
}

run_tests() {
  local t
  for t in "$unpacked"/tests/bin/*_test; do
    run_test "$t" "$(basename "$t")"
  done
  SHARDWISE_CUDA_SYNCHRONOUS=1 run_test "$unpacked/tests/bin/gpt_gpu_parity_test" \
    gpt_gpu_parity_test_synchronous
}

run_cluster() {
  "$root/tests/gpu/cluster_check.sh" "$unpacked/bundle" >"$logs/cluster_check.log" 2>&1
  record "cluster_check: rc $?; $(grep -c '^PASS' "$logs/cluster_check.log") passed, $(grep -c '^FAIL' "$logs/cluster_check.log") failed"
}

# Copies what the benchmarks appended to bench/RESULTS.md in this call to $out.
save_appended() {
  tail -n +"$((results_lines + 1))" "$root/bench/RESULTS.md" >"$out/results-appended-$phase.md"
}

# Runs bench/gpu_gpt.sh (or, with SHARDWISE_GPU_BENCH_MODEL=llama1b exported, its Llama)
# once per "PRECISION BATCH ATTENTION [STORAGE]" argument; the lines it appends to
# bench/RESULTS.md go to $out too.
run_gpu_gpt() {
  local run precision run_batch attention storage activation backward log rc
  local model=${SHARDWISE_GPU_BENCH_MODEL:-gpt2}
  for run in "$@"; do
    read -r precision run_batch attention storage activation backward <<<"$run"
    storage=${storage:-FP32}
    activation=${activation:-GELU}
    backward=${backward:-DETERMINISTIC}
    log="$logs/gpu_${model}_${precision}_${run_batch}_${attention}_${storage}_${activation}_$backward.log"
    "$root/bench/gpu_gpt.sh" "$unpacked/bundle" "$steps" "$precision" "$run_batch" "$attention" \
      "$storage" "$activation" "$backward" >"$log" 2>&1
    rc=$?
    record "gpu_gpt $model $run: rc $rc"
    # The figures, or the failure's own words, in the output that comes back.
    if [ "$rc" -eq 0 ]; then
      grep -E '^(\| (Shardwise|PyTorch)|worker: )' "$log" | tee -a "$out/summary-$phase.txt"
    else
      tail -n 40 "$log"
    fi
    save_appended
  done
}

run_bench() { run_gpu_gpt "bf16 $batch MATERIALIZED" "fp32 $batch MATERIALIZED"; }
run_fp32() { run_gpu_gpt "fp32 $batch MATERIALIZED"; }

# Runs one benchmark script (its log: LOG_NAME.log; a failure's last lines printed) and
# copies the lines it appended to bench/RESULTS.md to $out.
run_appending() {
  local log_name=$1 rc
  shift
  "$@" >"$logs/$log_name.log" 2>&1
  rc=$?
  record "$log_name: rc $rc"
  [ "$rc" -eq 0 ] || tail -n 30 "$logs/$log_name.log"
  save_appended
}
run_profile() {
  run_appending "gpu_gpt_profile_bf16_${batch}_MATERIALIZED" "$root/bench/gpu_gpt_profile.sh" \
    "$unpacked/bundle" "${2:-2}" bf16 "$batch" MATERIALIZED
}
run_busy() {
  run_appending "gpu_gpt_busy_bf16_${batch}_MATERIALIZED" "$root/bench/gpu_gpt_busy.sh" \
    "$unpacked/bundle" "$unpacked/tests" "$steps" bf16 "$batch"
}
run_fused() { run_gpu_gpt "bf16 $batch FUSED" "bf16 $((4 * batch)) FUSED"; }
run_storage() {
  run_gpu_gpt "bf16 $batch MATERIALIZED PARAM_DTYPE" "bf16 $batch FUSED PARAM_DTYPE"
}
run_owed() {
  run_gpu_gpt "bf16 $batch MATERIALIZED" "bf16 $batch FUSED" "bf16 $batch FUSED PARAM_DTYPE" \
    "bf16 $batch MATERIALIZED PARAM_DTYPE" "bf16 $((4 * batch)) FUSED PARAM_DTYPE"
}
run_gelu() { run_gpu_gpt "bf16 $batch FUSED PARAM_DTYPE GELU_TANH"; }
run_atomic() {
  run_gpu_gpt "bf16 $batch FUSED PARAM_DTYPE GELU ATOMIC" "bf16 $((4 * batch)) FUSED PARAM_DTYPE GELU ATOMIC"
}
run_llama() {
  export SHARDWISE_GPU_BENCH_MODEL=llama1b
  run_gpu_gpt "bf16 $llama_batch FUSED" "bf16 $llama_batch FUSED PARAM_DTYPE"
  unset SHARDWISE_GPU_BENCH_MODEL
}

case "$phase" in
  tests) run_tests ;;
  cluster) run_cluster ;;
  bench) run_bench ;;
  fp32) run_fp32 ;;
  fused) run_fused ;;
  storage) run_storage ;;
  llama) run_llama ;;
  owed) run_owed ;;
  gelu) run_gelu ;;
  atomic) run_atomic ;;
  busy) run_busy ;;
  profile) run_profile "$@" ;;
  all) run_tests; run_cluster; run_bench; run_fused; run_storage; run_llama ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
