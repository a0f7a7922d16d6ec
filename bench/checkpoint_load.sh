#!/usr/bin/env bash
# Host memory of loading a sharded checkpoint, and a model's initial weights file
# (bench/checkpoint_load_bench.cc): each reader's peak resident memory against its files
# read whole in the same run and against the model's bytes, appended to bench/RESULTS.md.
# Usage: bench/checkpoint_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

./dev.sh deps
bazel build //bench:checkpoint_load_bench >/dev/null 2>&1
bin=$(bazel info bazel-bin 2>/dev/null)
out=$("$bin/bench/checkpoint_load_bench")

report=$(python3 - "$out" <<'PY'
import sys
lines = sys.argv[1].splitlines()
checkpoint, model = (int(v) for v in lines[0].split())
whole = {}  # per family (the checkpoint's readers, the weights file's): its first row
rows = ["| reader | peak MiB | vs its files read whole | vs the model's bytes |",
        "| --- | --- | --- | --- |"]
for line in lines[1:]:
    name, peak = line.split()
    peak = int(peak)
    family = name.split("_")[0] if name.startswith("weights") else "checkpoint"
    whole.setdefault(family, peak)
    rows.append(f"| {name.replace('_', ' ')} | {peak / 2**20:.1f} | {peak / whole[family]:.2f} | {peak / model:.2f} |")
print(f"An MLP of 4 units of 2048 x 2048 (model {model / 2**20:.1f} MiB), AdamW, written by 4 ranks "
      f"(FULL_SHARD): {checkpoint / 2**20:.1f} MiB of shard files; and the model's initial weights file "
      "(init.safetensors_path) read whole, then of each parameter only what lies in a rank's shards. Each reader "
      "in a process of its own; peak = VmHWM less VmRSS at its start.\n")
print("\n".join(rows))
PY
)
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -m): checkpoint loading"
  echo
  echo "Command: \`bench/checkpoint_load.sh\`"
  echo
  echo "$report"
} >> bench/RESULTS.md
