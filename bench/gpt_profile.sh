#!/usr/bin/env bash
# Where the CPU time of one GPT step goes, Shardwise's against PyTorch's, on the model of
# bench/gpt.sh (world 2, one thread per rank), appended with this command to
# bench/RESULTS.md:
#   - Shardwise: `perf record` (Debian's linux-perf, sampling every thread of both rank
#     processes) over the timed steps of one configuration, its self time grouped by
#     kernel (bench/profile_groups.py: GEMMs, LayerNorm, GELU, attention, cross-entropy,
#     AdamW, copies and casts, communication, allocation, the rest);
#   - PyTorch DDP: its autograd profiler over rank 0's timed steps (self CPU time per
#     operator, the same groups), on Shardwise's OpenBLAS kernels (bench/blas_cores.sh).
# Usage: bench/gpt_profile.sh [FULL_SHARD|NO_SHARD|FUSED] [WARMUP_STEPS] [TIMED_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-NO_SHARD}
warmup=${2:-2}
steps=${3:-10}

./dev.sh bench-deps
source tools/prerequisites.sh
check_prerequisites bench
work=$(mktemp -d -t shardwise-profile.XXXXXX)
trap 'rm -rf "$work"' EXIT
bazel build //bench:gpt_bench >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
bin=$(bazel info bazel-bin 2>/dev/null)
source bench/blas_cores.sh
blas=$(blas_ours "$bin")

echo "== Shardwise GPT $config under perf ($warmup warm-up + $steps timed steps)" >&2
perf record -q -F 499 -o "$work/perf.data" -- "$bin/bench/gpt_bench" "$warmup" "$steps" "$config" \
  >"$work/ours.txt"
perf report -i "$work/perf.data" --no-children --sort=sym --stdio -q 2>/dev/null >"$work/ours.report"
echo "== PyTorch DDP GPT under the autograd profiler (OpenBLAS $blas)" >&2
SHARDWISE_TORCH_PROFILE="$work/torch.table" OPENBLAS_CORETYPE=$blas OMP_NUM_THREADS=1 \
  OPENBLAS_NUM_THREADS=1 \
  /usr/bin/python3 bench/pytorch_gpt_ddp.py "$warmup" "$steps" >"$work/torch.txt"

report=$(/usr/bin/python3 bench/profile_groups.py "$work/ours.report" "$work/torch.table" \
  "$(awk '{print $3}' "$work/ours.txt")" "$(cat "$work/torch.txt")")
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): GPT step profile, $config"
  echo
  echo "Command: \`bench/gpt_profile.sh $config $warmup $steps\`"
  echo
  echo "$report"
} >>bench/RESULTS.md
