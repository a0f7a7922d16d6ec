#!/usr/bin/env bash
# Runs Shardwise's CPU benchmarks against their baselines, measured in the same run, and
# appends the results, with this command, to bench/RESULTS.md:
#   - steps/s of the FSDP runtime (every strategy) against PyTorch DDP (Debian's
#     python3-torch, gloo, CPU, with Debian's OpenBLAS on Shardwise's kernels: see
#     bench/blas_cores.sh), one process and one thread per rank;
#   - all-gather / reduce-scatter bus bandwidth against raw Gloo calls;
#   - bytes per step through the collectives with BF16 parameters and compressing hooks,
#     against the FP32 run, from the runtime's counters;
#   - FP32 <-> FP16/BF16 cast throughput, vectorised and portable, against memcpy moving
#     the same bytes;
#   - FULL_SHARD step time with each prefetch setting against no prefetch, with an
#     injected link latency of 3 ms per collective;
#   - the GPT benchmarks of bench/gpt.sh and the Llama's of bench/llama.sh (tokens/s against
#     PyTorch DDP, memory per rank);
#   - a checkpoint load's host memory per reader (bench/checkpoint_load.sh) against the
#     checkpoint's bytes read whole.
# Usage: bench/run.sh [WARMUP_STEPS] [TIMED_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
warmup=${1:-3}
steps=${2:-20}

./dev.sh deps
missing=()
for pkg in python3-torch libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
bazel build //bench:all >/dev/null 2>&1
bin=$(bazel info bazel-bin 2>/dev/null)
source bench/blas_cores.sh
blas=$(blas_ours "$bin")

echo "== collectives (2 ranks, loopback)" >&2
collectives=$("$bin/bench/collectives_bench")
echo "== casts" >&2
casts=$("$bin/bench/casts_bench")
echo "== Shardwise training ($warmup warm-up + $steps timed steps per strategy)" >&2
ours=$("$bin/bench/training_bench" "$warmup" "$steps")
echo "== prefetch (3 ms injected link latency)" >&2
prefetch=$("$bin/bench/prefetch_bench" "$warmup" "$steps" 3000)
echo "== PyTorch DDP (OpenBLAS $blas)" >&2
torch=$(OPENBLAS_CORETYPE=$blas OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 \
  bench/pytorch_ddp.py "$warmup" "$steps")

report=$(python3 - "$torch" "$ours" "$collectives" "$casts" "$prefetch" "$blas" <<'PY'
import sys
torch = float(sys.argv[1])
lines = [f"OpenBLAS kernels: {sys.argv[6]} on both sides", "", "| strategy | Shardwise steps/s | PyTorch DDP steps/s | ratio |", "| --- | --- | --- | --- |"]
runs = [line.split() for line in sys.argv[2].splitlines()]
for name, value, *_ in runs:
    if "+" in name:
        continue
    lines.append(f"| {name} | {float(value):.2f} | {torch:.2f} | {float(value) / torch:.2f} |")
by_name = {r[0]: r for r in runs}
lines += ["", "| precision run | steps/s | all-gather MiB/step | reduce-scatter MiB/step | all-reduce MiB/step | bytes vs FP32 run |",
          "| --- | --- | --- | --- | --- | --- |"]
def mib(b): return f"{int(b) / 2**20:.1f}"
for name, value, ag, rs, ar in runs:
    if "+" not in name:
        continue
    base = by_name[name.split("+")[0]]
    ours, theirs = int(ag) + int(rs) + int(ar), int(base[2]) + int(base[3]) + int(base[4])
    lines.append(f"| {name} | {float(value):.2f} | {mib(ag)} | {mib(rs)} | {mib(ar)} | {ours / theirs:.2f} (FP32: {mib(base[2])} / {mib(base[3])} / {mib(base[4])}) |")
lines += ["", "| collective | bytes | Shardwise busbw GB/s | raw Gloo busbw GB/s | ratio |",
          "| --- | --- | --- | --- | --- |"]
for line in sys.argv[3].splitlines():
    op, size, ours, gloo = line.split()
    lines.append(f"| {op} | {int(size) >> 20} MiB | {float(ours):.3f} | {float(gloo):.3f} | {float(ours) / float(gloo):.2f} |")
lines += ["", "| cast (16 Mi elements) | vectorised GB/s | portable GB/s | memcpy GB/s (same bytes) | vectorised / memcpy |",
          "| --- | --- | --- | --- | --- |"]
for line in sys.argv[4].splitlines():
    name, vec, port, copy = line.split()
    lines.append(f"| {name} | {float(vec):.2f} | {float(port):.2f} | {float(copy):.2f} | {float(vec) / float(copy):.2f} |")
lines += ["", "| FULL_SHARD prefetch (3 ms link latency) | s/step | vs NONE |", "| --- | --- | --- |"]
prefetch = [line.split() for line in sys.argv[5].splitlines()]
base = float(prefetch[0][1])
for name, value in prefetch:
    lines.append(f"| {name} | {float(value):.4f} | {float(value) / base:.2f} |")
lines.append("")
lines.append("Cast GB/s count bytes read plus written (6 per element); the memcpy baseline moves the same number of bytes.")
print("\n".join(lines))
PY
)
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m)"
  echo
  echo "Command: \`bench/run.sh $warmup $steps\`"
  echo
  echo "$report"
} >> bench/RESULTS.md

# The GPT's throughput against PyTorch DDP and its memory against the prediction.
bench/gpt.sh
bench/llama.sh
bench/checkpoint_load.sh
