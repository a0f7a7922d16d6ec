#!/usr/bin/env bash
# GPT-2 124M on one GPU: tokens/s, MFU and peak memory of a Shardwise CUDA job (a
# coordinator and one CUDA worker from an unpacked bundle, FULL_SHARD at world size 1 over
# NCCL, one FSDP unit per block) against PyTorch training the same model on the same GPU in
# the same run (bench/pytorch_gpu_gpt.py: eager with the same manual attention, eager with
# PyTorch's fused attention, torch.compile), appended with this command to
# bench/RESULTS.md. For GPU hosts with PyTorch (see docs/operations.md, "GPU
# checks"); the shape is nanoGPT's GPT-2 124M: 12 layers, 12 heads, 768 wide, context 1024,
# vocabulary 50304. SHARDWISE_GPU_BENCH_MODEL=llama1b (bench/gpu_llama.sh) runs the Llama of
# Llama 3.2 1B's shape at context 2048 instead (bench/gpu_jobs.sh), against
# bench/pytorch_gpu_llama.py.
#
# SHARDWISE_TORCH_CACHE, a directory: PyTorch's figures are measured once per model,
# precision, batch and step count there, and reused by later runs.
#
# ATTENTION is the job's model attention (MATERIALIZED by default, or FUSED); STORAGE
# its cuda.storage (FP32 by default, or PARAM_DTYPE with bf16: 16-bit activations);
# ACTIVATION the GPT's MLP activation on both sides (GELU, nanoGPT's erf form, by default,
# or GELU_TANH, GPT-2's own, which cuBLASLt's epilogue can fuse into the GEMM); BACKWARD
# FUSED attention's cuda.attention_backward on cuDNN (DETERMINISTIC by default, or ATOMIC:
# dQ summed with atomic adds, scratch linear in the context).
#
# usage: bench/gpu_gpt.sh BUNDLE_DIR [STEPS] [bf16|fp32] [BATCH] [ATTENTION] [STORAGE] [ACTIVATION] [BACKWARD]
set -euo pipefail
bundle=$(cd "$1" && pwd)
steps=${2:-30}
precision=${3:-bf16}
model=${SHARDWISE_GPU_BENCH_MODEL:-gpt2}
attention=${5:-MATERIALIZED}
storage=${6:-FP32}
activation=${7:-GELU}
backward=${8:-DETERMINISTIC}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
# What each model's report needs: its name, context, PyTorch side, and FLOPs per token
# (6 N + 12 L x attention width x T, N without a position table, a tied weight once).
theirs_options=()
case "$model" in
  gpt2)
    batch=${4:-8} title="GPT-2 124M" seq=1024 theirs_script=pytorch_gpu_gpt.py
    [ "$activation" = GELU_TANH ] && theirs_options=(--gelu tanh)
    flops_per_token=$((6 * 123689472 + 12 * 12 * 768 * 1024)) ;;
  llama1b)
    batch=${4:-4} title="Llama 1B (Llama 3.2 1B's shape)" seq=2048 theirs_script=pytorch_gpu_llama.py
    flops_per_token=$((6 * 1235814400 + 12 * 16 * 2048 * 2048)) ;;
  *) echo "unknown SHARDWISE_GPU_BENCH_MODEL $model (gpt2 or llama1b)" >&2; exit 2 ;;
esac
peak_tflops=67        # H100 SXM, FP32 without tensor cores (TF32 is off)
if [ "$precision" = bf16 ]; then
  peak_tflops=989.5   # H100 SXM, dense BF16 tensor cores
fi

. "$here/gpu_jobs.sh"
gpu_tokens "$work/train.bin"

. "$here/gpu_daemons.sh"

gpu_job "$model" "$work/job.yaml" "$work/train.bin" "$steps" "$precision" "$batch" "$attention" \
  "$storage" "$activation" "$backward"
# The device memory the worker holds (its CUDA context, the libraries' own memory and the
# caching allocator's pools), sampled while the job runs.
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$work/memory" &
pids+=($!)
job=$("$bundle/bin/shardwise" submit "$work/job.yaml")
watch_job "$job"
# What the worker decided for its kernels (cuBLASLt's GELU epilogues as measured, FUSED
# attention's kernel, cuDNN's plans, GEMMs left unfused), printed beside the figures: a
# figure is read with the kernels that made it.
{ grep -oE "(cuBLASLt's GELU epilogues|measuring cuBLASLt's GELU|FUSED attention \(|cuDNN attention plan built|cuBLASLt cannot run|cuBLASLt refused).*" \
  "$work/worker.log" || true; } | sort -u | sed -n '1,20s/^/worker: /p'
steps_per_second=$(job_steps_per_second "$job")
# Compared with PyTorch's max allocated: the allocator's peak, the estimate beside it (which
# should bound it), and what the device held at most (the CUDA context, the libraries' own
# memory, the allocator's cache). PyTorch's count includes its cuBLAS workspaces (its caching
# allocator hands them out); Shardwise's leaves out cuBLASLt's 32 MiB and cuBLAS's own
# (docs/operations.md, "Memory per rank"). PyTorch's peak is of its timed steps (reset after
# warm-up); Shardwise's of the whole job, its first step included.
device_mib=$(sort -n "$work/memory" | tail -1)
peak_memory="$(job_peak_allocated "$job") (estimate $(job_memory_estimate "$job")); device ${device_mib} MiB (nvidia-smi)"
# PyTorch's lines for this model, precision, batch and step count are measured once per
# SHARDWISE_TORCH_CACHE directory, where one is given (tests/gpu/device_run.sh gives one
# in /tmp, so the phases on one machine time PyTorch once per configuration); lines with a
# variant PyTorch could not run are not kept, so a later run tries again.
cached=${SHARDWISE_TORCH_CACHE:+$SHARDWISE_TORCH_CACHE/$model-$precision-$batch-$steps-$activation.txt}
if [ -n "$cached" ] && [ -s "$cached" ]; then
  theirs=$(cat "$cached")
else
  theirs=$(python3 "$here/$theirs_script" --precision "$precision" --batch "$batch" \
    --steps "$steps" --peak_tflops "$peak_tflops" "${theirs_options[@]}")
  if [ -n "$cached" ] && ! grep -q unavailable <<<"$theirs"; then
    printf '%s\n' "$theirs" >"$cached"
  fi
fi

report=$(python3 - "$steps_per_second" "$batch" "$precision" "$peak_tflops" "$theirs" "$peak_memory" \
  "$attention" "$storage" "$model" "$title" "$seq" "$flops_per_token" "$activation" "$backward" <<'PY'
import sys
sps, batch, precision, peak, theirs, peak_memory, attention, storage, model, title = sys.argv[1:11]
seq, flops_per_token, activation = int(sys.argv[11]), int(sys.argv[12]), sys.argv[13]
backward = "" if sys.argv[14] == "DETERMINISTIC" else f" ({sys.argv[14].lower()} backward)"
tokens = float(sps) * int(batch) * seq
mfu = tokens * flops_per_token / (float(peak) * 1e12)
lines = [f"{title}, batch {batch} x {seq}, {precision}, one GPU (TF32 off)"
         + (f", {activation} on both sides" if model == "gpt2" else ""), "",
         "| run | tokens/s | MFU | peak memory allocated (the caching allocator's count) | Shardwise / this |", "| --- | --- | --- | --- | --- |",
         f"| Shardwise FULL_SHARD world 1 (NCCL), {attention} attention{backward}, {storage} storage | {tokens:.0f} | {mfu:.3f} | {peak_memory} | 1.00 |"]
for line in theirs.splitlines():
    name, *rest = line.split()
    if rest[0] == "unavailable":
        lines.append(f"| PyTorch {name} | {' '.join(rest)} | | | |")
    else:
        t, m, p = float(rest[0]), float(rest[1]), float(rest[2])
        # In GiB to one decimal, as `shardwise describe` gives Shardwise's.
        lines.append(f"| PyTorch {name} | {t:.0f} | {m:.3f} | {p / 1024:.1f} GiB | {tokens / t:.2f} |")
if model == "gpt2":
    lines.append("")
    lines.append(f"llm.c's figure, about 460,000 tokens/s per H100 (8 GPUs, BF16): Shardwise at {tokens / 460000:.2f} of it.")
print("\n".join(lines))
PY
)
echo "$report"
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): $title"
  echo
  echo "Command: \`$([ "$model" = gpt2 ] && echo bench/gpu_gpt.sh || echo bench/gpu_llama.sh) BUNDLE $steps $precision $batch $attention $storage $activation $backward\`"
  echo
  echo "$report"
} >> "$here/RESULTS.md"
