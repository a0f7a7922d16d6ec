# shellcheck shell=bash
# Sourced by the GPU benchmarks (gpu_gpt.sh, gpu_llama.sh, gpu_gpt_profile.sh): the jobs
# they run, under FULL_SHARD at world size 1 over NCCL, one FSDP unit per block, AdamW:
#   gpt2     nanoGPT's GPT-2 124M (12 layers, 12 heads, 768 wide, context 1024,
#            vocabulary 50304)
#   llama1b  Llama 3.2 1B's shape (16 layers, 2048 wide, 32 heads on 8 K/V heads of 64,
#            SwiGLU 8192, vocabulary 128256, tied head, llama3 rotary scaling), context 2048
#
# gpu_job MODEL FILE TRAIN_BIN STEPS PRECISION BATCH ATTENTION [STORAGE] [ACTIVATION]
# [BACKWARD]: writes the job spec to FILE (PRECISION bf16 or fp32; ATTENTION MATERIALIZED or
# FUSED; STORAGE FP32, the default, or PARAM_DTYPE: cuda.storage, docs/job-spec.md;
# ACTIVATION, the GPT's MLP: GELU, nanoGPT's and the default, or GELU_TANH, GPT-2's own;
# BACKWARD, cuda.attention_backward: DETERMINISTIC, the default, or ATOMIC).
gpu_job() {
  local mixed="" model
  [ "$5" = bf16 ] && mixed="mixed_precision: {param_dtype: BF16}, "
  case "$1" in
    gpt2)
      model="gpt: {vocab_size: 50304, block_size: 1024, n_layer: 12, n_head: 12, n_embd: 768, attention: $7, activation: ${9:-GELU}}" ;;
    llama1b)
      model="llama: {vocab_size: 128256, hidden_size: 2048, intermediate_size: 8192,
    num_hidden_layers: 16, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64,
    max_position_embeddings: 131072, block_size: 2048, rms_norm_eps: 1.0e-5,
    rope_theta: 500000.0, tie_word_embeddings: true, attention: $7,
    rope_scaling: {rope_type: llama3, factor: 32.0, low_freq_factor: 1.0,
      high_freq_factor: 4.0, original_max_position_embeddings: 8192}}" ;;
    *) echo "gpu_job: unknown model $1 (gpt2 or llama1b)" >&2; return 2 ;;
  esac
  cat >"$2" <<YAML
name: $1-bench
model:
  $model
wrap: {modules: [BLOCK]}
fsdp: {${mixed}sharding_strategy: FULL_SHARD}
optimizer:
  adamw: {lr: 0.0006, weight_decay: 0.1}
  weight_decay_params: MATRICES
data: {tokens: {train_path: $3}}
init: {seed: 0}
global_batch_size: $6
steps: $4
# nanoGPT reads its loss when it logs (every 10 iterations); so does this job.
loss_read_interval_steps: 10
world_size: 1
device: CUDA
cuda: {collectives: NCCL, storage: STORAGE_${8:-FP32}$(
  [ "${10:-DETERMINISTIC}" = DETERMINISTIC ] || echo ", attention_backward: ${10}")}
YAML
}

# Random tokens (below GPT-2's vocabulary, so any of the models takes them) for TRAIN_BIN:
# the throughput does not depend on what the text says.
gpu_tokens() {
  python3 -c "
import numpy as np
np.random.default_rng(0).integers(0, 50304, 20_000_000, dtype=np.uint16).tofile('$1')"
}
