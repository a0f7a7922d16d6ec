#!/usr/bin/env bash
# The GPT benchmarks against their baselines, measured in the same run, appended with this
# command to bench/RESULTS.md:
#   - tokens/s of a small GPT (4 layers, 256 wide, 128 context, byte vocabulary, global
#     batch 16 sequences) at world 2, FULL_SHARD and NO_SHARD, and FULL_SHARD with FUSED
#     attention, against PyTorch DDP (Debian's python3-torch, gloo; its attention
#     materialised, as torch 1.13 has no scaled_dot_product_attention) on the same model,
#     data, optimizer and threads;
#   - peak memory per rank (parameters, gradients, optimizer state, activations) for
#     FULL_SHARD with and without prefetch, NO_SHARD, FULL_SHARD with activation
#     checkpointing and with FUSED attention, and both attentions at a context of 1024,
#     against contracts/memory_estimate.h's estimate (what the coordinator and the workers
#     check before a job runs).
# Usage: bench/gpt.sh [WARMUP_STEPS] [TIMED_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
warmup=${1:-2}
steps=${2:-10}

./dev.sh deps
bazel build //bench:gpt_bench >/dev/null 2>&1
bin=$(bazel info bazel-bin 2>/dev/null)

echo "== Shardwise GPT ($warmup warm-up + $steps timed steps)" >&2
ours=$("$bin/bench/gpt_bench" "$warmup" "$steps")
echo "== PyTorch DDP GPT" >&2
torch=$(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/pytorch_gpt_ddp.py "$warmup" "$steps")

report=$(python3 - "$torch" "$ours" <<'PY'
import sys
torch = float(sys.argv[1])
lines = ["| GPT, world 2 | Shardwise tokens/s | PyTorch DDP tokens/s | ratio |", "| --- | --- | --- | --- |"]
rows = [line.split() for line in sys.argv[2].splitlines()]
for kind, name, *values in rows:
    if kind == "throughput":
        lines.append(f"| {name} | {float(values[0]):.0f} | {torch:.0f} | {float(values[0]) / torch:.2f} |")
estimated = {name: [int(v) for v in values] for kind, name, *values in rows if kind == "estimated"}
lines += ["", "| peak MiB per rank, measured / estimated | parameters | gradients | optimizer state | activations |",
          "| --- | --- | --- | --- | --- |"]
mib = lambda b: f"{b / 2**20:.2f}"
for kind, name, *values in rows:
    if kind != "memory":
        continue
    params, grads, optim, acts = [int(v) for v in values]
    p_params, p_grads, p_optim, p_acts = estimated[name]
    lines.append(f"| {name} | {mib(params)} / {mib(p_params)} | {mib(grads)} / {mib(p_grads)} "
                 f"| {mib(optim)} / {mib(p_optim)} | {mib(acts)} / {mib(p_acts)} |")
print("\n".join(lines))
PY
)
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): GPT"
  echo
  echo "Command: \`bench/gpt.sh $warmup $steps\`"
  echo
  echo "$report"
} >> bench/RESULTS.md
