#!/usr/bin/env bash
# Where the GPU time of a GPT-2 124M training step goes: every kernel of a Shardwise CUDA
# job (the job of bench/gpu_gpt.sh: one worker, FULL_SHARD at world 1 over NCCL) timed by
# Nsight Compute (gpu__time_duration, clocks left alone), against PyTorch eager training
# the same model on the same GPU (its profiler's device time per kernel), grouped by what
# the kernels compute (bench/gpu_kernel_groups.py: GEMMs, attention, LayerNorm, GELU,
# cross-entropy, optimizer, casts and copies, elementwise, NCCL), appended with this
# command to bench/RESULTS.md. Nsight Compute runs each kernel alone, so the figures are
# device time per kernel, not the step's wall time (bench/gpu_gpt.sh measures that).
#
# usage: bench/gpu_gpt_profile.sh BUNDLE_DIR [STEPS] [bf16|fp32] [BATCH] [ATTENTION]
set -euo pipefail
bundle=$(cd "$1" && pwd)
steps=${2:-2}
precision=${3:-bf16}
batch=${4:-8}
attention=${5:-MATERIALIZED}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)

ncu=$(command -v ncu || true)
for candidate in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [ -z "$ncu" ] && [ -x "$candidate" ] && ncu=$candidate
done
if [ -z "$ncu" ]; then
  echo "no Nsight Compute (ncu) on this host" >&2
  exit 1
fi
. "$here/gpu_jobs.sh"
gpu_tokens "$work/train.bin"
worker_wrapper=("$ncu" --target-processes all --clock-control none --csv --print-units base
  --metrics gpu__time_duration.sum --log-file "$work/ncu.csv")
. "$here/gpu_daemons.sh"
ncu_pid=${pids[-1]}

gpu_job gpt2 "$work/job.yaml" "$work/train.bin" "$steps" "$precision" "$batch" "$attention"
job=$("$bundle/bin/shardwise" submit "$work/job.yaml")
watch_job "$job"
# Nsight Compute writes its table when the worker exits: SIGTERM drains it. (The
# pattern is anchored: ncu's own command line names the worker too.)
pkill -TERM -f "^$bundle/bin/shardwise-worker" || true
for _ in $(seq 600); do kill -0 "$ncu_pid" 2>/dev/null || break; sleep 0.1; done

python3 "$here/pytorch_gpu_gpt.py" --precision "$precision" --batch "$batch" --warmup 3 \
  --steps "$steps" --variants eager --kernel_profile "$work/torch.tsv" >/dev/null
report=$(python3 "$here/gpu_kernel_groups.py" "$work/ncu.csv" "$steps" "$work/torch.tsv" "$steps")
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): GPT-2 124M step, GPU time per kernel group"
  echo
  echo "Command: \`bench/gpu_gpt_profile.sh BUNDLE $steps $precision $batch $attention\`"
  echo "(batch $batch x 1024, $precision, $attention attention; per step over $steps steps, the first included)"
  echo
  echo "$report"
} >>"$here/RESULTS.md"
