# shellcheck shell=bash
# Sourced by the GPT-2 124M GPU benchmarks (gpu_gpt.sh, gpu_gpt_profile.sh): the job they
# run, nanoGPT's GPT-2 124M (12 layers, 12 heads, 768 wide, context 1024, vocabulary
# 50304) under FULL_SHARD at world size 1 over NCCL, one FSDP unit per block, AdamW.
#
# gpt2_job FILE TRAIN_BIN STEPS PRECISION BATCH ATTENTION [STORAGE]: writes the job spec
# to FILE (PRECISION bf16 or fp32; ATTENTION MATERIALIZED or FUSED; STORAGE FP32, the
# default, or PARAM_DTYPE: cuda.storage, docs/job-spec.md).
gpt2_job() {
  local mixed=""
  [ "$4" = bf16 ] && mixed="mixed_precision: {param_dtype: BF16}, "
  cat >"$1" <<YAML
name: gpt2-124m-bench
model:
  gpt: {vocab_size: 50304, block_size: 1024, n_layer: 12, n_head: 12, n_embd: 768, attention: $6}
wrap: {modules: [BLOCK]}
fsdp: {${mixed}sharding_strategy: FULL_SHARD}
optimizer:
  adamw: {lr: 0.0006, weight_decay: 0.1}
  weight_decay_params: MATRICES
data: {tokens: {train_path: $2}}
init: {seed: 0}
global_batch_size: $5
steps: $3
# nanoGPT reads its loss when it logs (every 10 iterations); so does this job.
loss_read_interval_steps: 10
world_size: 1
device: CUDA
cuda: {collectives: NCCL, storage: STORAGE_${7:-FP32}}
YAML
}

# Random tokens for TRAIN_BIN: the throughput does not depend on what the text says.
gpt2_tokens() {
  python3 -c "
import numpy as np
np.random.default_rng(0).integers(0, 50304, 20_000_000, dtype=np.uint16).tofile('$1')"
}
