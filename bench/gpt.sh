#!/usr/bin/env bash
# The GPT benchmarks against their baselines, measured in the same run, appended with this
# command to bench/RESULTS.md:
#   - tokens/s of a small GPT (4 layers, 256 wide, 128 context, byte vocabulary, global
#     batch 16 sequences), FULL_SHARD and NO_SHARD, and FULL_SHARD with FUSED attention,
#     against PyTorch DDP (Debian's python3-torch, gloo; its attention materialised, as
#     torch 1.13 has no scaled_dot_product_attention) on the same model, data, optimizer
#     and threads (one per rank): at world 2 RUNS times, the two sides taking turns, with
#     the median and the spread of the ratios (this machine moves by +-10% from run to
#     run); at worlds 1 and 4 once; and both attentions at a context of 1024 RUNS times
#     (median and spread). PyTorch runs on Shardwise's OpenBLAS kernels
#     (bench/blas_cores.sh); where OpenBLAS alone would pick narrower ones for it,
#     PyTorch as installed is measured beside it;
#   - the two attentions' kernels alone, forward and backward on one core, at contexts
#     of 128 and 1024 (bench/attention_bench.cc), the materialised one the baseline;
#   - peak memory per rank (parameters, gradients, optimizer state, activations) for
#     FULL_SHARD with and without prefetch, NO_SHARD, FULL_SHARD with activation
#     checkpointing and with FUSED attention, and both attentions at a context of 1024,
#     against contracts/memory_estimate.h's estimate (what the coordinator and the workers
#     check before a job runs).
# Usage: bench/gpt.sh [WARMUP_STEPS] [TIMED_STEPS] [RUNS]   (defaults 3 30 3)
# With SHARDWISE_BENCH_MODEL=llama (bench/llama.sh), the same for a Llama of the same size
# (gpt_bench.cc), against tests/pytorch/llama.py's module under DDP.
set -euo pipefail
cd "$(dirname "$0")/.."
warmup=${1:-3}
steps=${2:-30}
runs=${3:-3}
model=${SHARDWISE_BENCH_MODEL:-gpt}
export SHARDWISE_BENCH_MODEL=$model
kind=$([[ $model == llama ]] && echo Llama || echo GPT)

./dev.sh deps
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
bazel build //bench:gpt_bench //bench:attention_bench >"$rows" 2>&1 || { cat "$rows" >&2; exit 1; }
: >"$rows"
bin=$(bazel info bazel-bin 2>/dev/null)
source bench/blas_cores.sh
blas=$(blas_ours "$bin")
installed=$(blas_installed)

torch_ddp() {  # torch_ddp WORLD [ENV...]: PyTorch DDP's tokens/s
  env "${@:2}" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/pytorch_gpt_ddp.py \
    "$warmup" "$steps" "$1" "$model"
}

# One round at WORLD: Shardwise's three configurations, then PyTorch's on the same
# kernels and as installed, as "RUN WORLD NAME OURS TORCH INSTALLED" lines.
round() {  # round RUN WORLD
  local ours torch as_installed
  echo "== run $1, world $2: Shardwise $kind ($warmup warm-up + $steps timed steps)" >&2
  ours=$(SHARDWISE_BENCH_WORLD=$2 "$bin/bench/gpt_bench" "$warmup" "$steps" throughput)
  echo "== run $1, world $2: PyTorch DDP $kind (OpenBLAS $blas)" >&2
  torch=$(torch_ddp "$2" OPENBLAS_CORETYPE="$blas")
  as_installed=$torch
  if [[ $installed != "$blas" ]]; then
    echo "== run $1, world $2: PyTorch DDP $kind as installed (OpenBLAS $installed)" >&2
    as_installed=$(torch_ddp "$2" -u OPENBLAS_CORETYPE)
  fi
  awk -v run="$1" -v world="$2" -v torch="$torch" -v installed="$as_installed" \
    '$1 == "throughput" {print run, world, $2, $3, torch, installed}' <<<"$ours" >>"$rows"
}

for ((run = 1; run <= runs; run++)); do round "$run" 2; done
round 1 1
round 1 4
echo "== both attentions at a context of 1024 (world 2)" >&2
long=$(for ((run = 1; run <= runs; run++)); do "$bin/bench/gpt_bench" 1 5 long; done)
echo "== the attention kernels alone (one core)" >&2
kernels=$("$bin/bench/attention_bench" 128 1024 | grep '^ATTENTION')
echo "== memory per rank against the estimate (world 2)" >&2
memory=$("$bin/bench/gpt_bench" 0 0 memory)

report=$(/usr/bin/python3 - "$rows" "$memory" "$runs" "$long" "$kind" "$blas" "$installed" "$kernels" <<'PY'
import statistics
import sys

kind, blas, installed = sys.argv[5:8]

rows = [line.split() for line in open(sys.argv[1])]
runs = int(sys.argv[3])
long = {}
for _, name, value in (line.split() for line in sys.argv[4].splitlines()):
    long.setdefault(name, []).append(float(value))
same = installed == blas
lines = [f"OpenBLAS kernels: {blas} on both sides" +
         ("" if same else f"; PyTorch as installed gets OpenBLAS's own pick, {installed}"), ""]
extra = "" if same else f" | PyTorch as installed ({installed}), median | ratio to it, median"
lines += [f"| {kind}, world 2, {runs} runs | Shardwise tokens/s, median | PyTorch DDP tokens/s, median "
          f"| ratio, median | ratio, lowest-highest{extra} |",
          "| --- | --- | --- | --- | --- |" + ("" if same else " --- | --- |")]
names = list(dict.fromkeys(row[2] for row in rows if row[1] == "2"))
for name in names:
    mine = [tuple(map(float, row[3:6])) for row in rows if row[1] == "2" and row[2] == name]
    ratios = sorted(o / t for o, t, _ in mine)
    line = (f"| {name} | {statistics.median(o for o, _, _ in mine):.0f} "
            f"| {statistics.median(t for _, t, _ in mine):.0f} | {statistics.median(ratios):.2f} "
            f"| {ratios[0]:.2f}-{ratios[-1]:.2f} |")
    if not same:
        line += (f" {statistics.median(i for _, _, i in mine):.0f} "
                 f"| {statistics.median(o / i for o, _, i in mine):.2f} |")
    lines.append(line)
extra = "" if same else " PyTorch as installed | ratio to it |"
lines += ["", f"| {kind}, one run each | world | Shardwise tokens/s | PyTorch DDP tokens/s | ratio |{extra}",
          "| --- | --- | --- | --- | --- |" + ("" if same else " --- | --- |")]
for _, world, name, ours, torch, as_installed in rows:
    if world != "2":
        line = (f"| {name} | {world} | {float(ours):.0f} | {float(torch):.0f} "
                f"| {float(ours) / float(torch):.2f} |")
        if not same:
            line += f" {float(as_installed):.0f} | {float(ours) / float(as_installed):.2f} |"
        lines.append(line)
material, fused = long["MATERIALIZED,T=1024"], long["FUSED,T=1024"]
long_ratios = sorted(f / m for m, f in zip(material, fused))
lines += ["", f"| {kind}, T = 1024, world 2, FULL_SHARD, {runs} runs (5 timed steps each) "
          "| MATERIALIZED tokens/s, median | FUSED tokens/s, median | FUSED / MATERIALIZED, median "
          "| lowest-highest |", "| --- | --- | --- | --- | --- |",
          f"| 2 sequences per rank | {statistics.median(material):.0f} | {statistics.median(fused):.0f} "
          f"| {statistics.median(long_ratios):.2f} | {long_ratios[0]:.2f}-{long_ratios[-1]:.2f} |"]
lines += ["", "| attention kernels alone, forward + backward, 2 x 4 heads of 64, one core, best of 6 "
          "| MATERIALIZED ms | FUSED ms | FUSED speed / MATERIALIZED | GFLOP/s, MATERIALIZED / FUSED |",
          "| --- | --- | --- | --- | --- |"]
for _, seq, material_ms, fused_ms, speedup, material_gflops, fused_gflops in (
        line.split() for line in sys.argv[8].splitlines()):
    lines.append(f"| T = {seq} | {material_ms} | {fused_ms} | {speedup} "
                 f"| {material_gflops} / {fused_gflops} |")
memory = [line.split() for line in sys.argv[2].splitlines()]
estimated = {name: [int(v) for v in values] for kind, name, *values in memory if kind == "estimated"}
lines += ["", "| peak MiB per rank, measured / estimated | parameters | gradients | optimizer state "
          "| activations |", "| --- | --- | --- | --- | --- |"]
mib = lambda b: f"{b / 2**20:.2f}"
for kind, name, *values in memory:
    if kind != "memory":
        continue
    measured = [int(v) for v in values]
    cells = " | ".join(f"{mib(m)} / {mib(e)}{' **over**' if m > e else ''}"
                       for m, e in zip(measured, estimated[name]))
    lines.append(f"| {name} | {cells} |")
print("\n".join(lines))
PY
)
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): $kind"
  echo
  echo "Command: \`$([[ $model == llama ]] && echo bench/llama.sh || echo bench/gpt.sh) $warmup $steps $runs\`"
  echo
  echo "$report"
} >>bench/RESULTS.md
