#!/usr/bin/env bash
# Training steps/s on one GPU: a Shardwise CUDA job (a coordinator and one CUDA worker from
# an unpacked bundle, FULL_SHARD at world size 1 over NCCL) against PyTorch training the
# same MLP on the same GPU (bench/pytorch_gpu_mlp.py), in the same run. For GPU hosts with
# PyTorch; prints both and their ratio.
#
# usage: bench/gpu_training.sh BUNDLE_DIR [STEPS] [fp32|bf16]
#   bf16: mixed precision with BF16 parameters (Shardwise: fsdp.mixed_precision.param_dtype;
#         PyTorch: torch.autocast to bfloat16)
set -euo pipefail
bundle=$(cd "$1" && pwd)
steps=${2:-300}
precision=${3:-fp32}
mixed=""
[ "$precision" = bf16 ] && mixed="mixed_precision: {param_dtype: BF16}, "
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)

. "$here/gpu_daemons.sh"

cat >"$work/job.yaml" <<YAML
name: gpu-bench
model: {layer_widths: [1024, 4096, 4096, 1024], activation: GELU}
fsdp: {${mixed}sharding_strategy: FULL_SHARD}
optimizer: {sgd: {lr: 0.01, momentum: 0.9}}
loss: MSE
data: {synthetic: {seed: 1, num_samples: 4096}}
global_batch_size: 64
steps: $steps
world_size: 1
device: CUDA
cuda: {collectives: NCCL}
YAML
job=$("$bundle/bin/shardwise" submit "$work/job.yaml")
watch_job "$job"
ours=$(job_steps_per_second "$job")
theirs=$(python3 "$here/pytorch_gpu_mlp.py" --steps "$steps" --precision "$precision" | awk '{print $2}')
echo "model [1024, 4096, 4096, 1024], batch 64, $steps steps, $precision (TF32 off)"
echo "Shardwise FULL_SHARD world 1 (NCCL): $ours steps/s"
echo "PyTorch nn.Sequential on the same GPU: $theirs steps/s"
python3 -c "print(f'ratio {float(\"$ours\") / float(\"$theirs\"):.2f}')"
