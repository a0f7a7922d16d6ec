#!/usr/bin/env bash
# How busy the GPU keeps during a GPT-2 124M training step: the fraction of each step's
# wall time during which at least one kernel, copy or memset runs, for a Shardwise CUDA job
# (the job of bench/gpu_gpt.sh: one worker, FULL_SHARD at world 1 over NCCL) and for
# PyTorch training the same model on the same GPU (eager and torch.compile), appended
# with this command to bench/RESULTS.md. Every GPU activity is recorded by CUPTI through
# an injection library (bench/gpu_busy/cupti_trace_injection.cc, loaded by the driver from
# CUDA_INJECTION64_PATH: the process runs unchanged); a step runs from the end of one
# step's last optimizer kernel to the next (Shardwise: AdamW) or between marker kernels
# (PyTorch: pytorch_gpu_timing.py launches one before each timed step under a trace).
# Where the GPU idles, it waits for the host.
#
# usage: bench/gpu_gpt_busy.sh BUNDLE_DIR TOOLS_DIR [STEPS] [bf16|fp32] [BATCH] [ATTENTION]
#          [STORAGE]
#   TOOLS_DIR: the unpacked GPU test bundle (its bin/ holds gpu_busy_report and
#   libshardwise_gpu_trace.so, its lib/ their libraries).
set -euo pipefail
bundle=$(cd "$1" && pwd)
tools=$(cd "$2" && pwd)
steps=${3:-30}
precision=${4:-bf16}
batch=${5:-8}
attention=${6:-MATERIALIZED}
storage=${7:-FP32}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
injection="$tools/bin/libshardwise_gpu_trace.so"
report() { LD_LIBRARY_PATH="$tools/lib:${LD_LIBRARY_PATH:-}" "$tools/bin/gpu_busy_report" "$@"; }

. "$here/gpu_jobs.sh"
gpu_tokens "$work/train.bin"
worker_wrapper=(env "CUDA_INJECTION64_PATH=$injection"
  "SHARDWISE_GPU_BUSY_TRACE=$work/shardwise.tsv")
. "$here/gpu_daemons.sh"
worker_pid=${pids[-1]}

gpu_job gpt2 "$work/job.yaml" "$work/train.bin" "$steps" "$precision" "$batch" "$attention" \
  "$storage"
job=$("$bundle/bin/shardwise" submit "$work/job.yaml")
watch_job "$job"
# The trace is written as the worker exits: SIGTERM drains it.
kill -TERM "$worker_pid"
for _ in $(seq 600); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.1; done
# Each step ends with one AdamW kernel per FSDP unit: the report divides their count by
# the steps run.
ours=$(report "$work/shardwise.tsv" AdamW 3 "$steps")
echo "Shardwise: $ours"

theirs=""
# The injection library finds its own libraries through its run path ($ORIGIN/../lib);
# the kit's lib/ stays off PyTorch's search path, so PyTorch loads the host's libraries.
# A PyTorch variant that fails is reported as unavailable, with its last words.
for variant in eager compile; do
  if CUDA_INJECTION64_PATH="$injection" SHARDWISE_GPU_BUSY_TRACE="$work/torch-$variant.tsv" \
    python3 "$here/pytorch_gpu_gpt.py" --precision "$precision" --batch "$batch" \
    --steps "$steps" --variants "$variant" >"$work/torch-$variant.log" 2>&1 &&
    figure=$(report "$work/torch-$variant.tsv" spin_kernel 1 2>&1); then
    theirs+="| PyTorch $variant | $figure |"$'\n'
  else
    tail -n 20 "$work/torch-$variant.log" >&2
    theirs+="| PyTorch $variant | unavailable: $(tail -n 1 "$work/torch-$variant.log" | cut -c1-160) ${figure:-} |"$'\n'
  fi
  figure=""
done

table="| run | GPU busy |
| --- | --- |
| Shardwise FULL_SHARD world 1 (NCCL), $attention attention, $storage storage | $ours |
$theirs"
echo "$table"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): GPT-2 124M, GPU busy per step"
  echo
  echo "Command: \`bench/gpu_gpt_busy.sh BUNDLE TOOLS $steps $precision $batch $attention $storage\`"
  echo "(batch $batch x 1024, $precision; CUPTI's kernel, copy and memset times)"
  echo
  echo "$table"
} >>"$here/RESULTS.md"
