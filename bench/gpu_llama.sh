#!/usr/bin/env bash
# bench/gpu_gpt.sh for the Llama (issue 31's "Llama on one GPU"): Llama 3.2 1B's shape (16
# layers, 2048 wide, 32 heads on 8 K/V heads, SwiGLU 8192, vocabulary 128256, tied head)
# at context 2048 on one GPU, FULL_SHARD at world 1 over NCCL, against PyTorch training
# tests/pytorch/llama.py's module on the same GPU in the same run (eager with HF's eager
# attention, with scaled_dot_product_attention, torch.compile: bench/pytorch_gpu_llama.py);
# tokens/s, MFU and peak memory appended with this command to bench/RESULTS.md.
#
# usage: bench/gpu_llama.sh BUNDLE_DIR [STEPS] [bf16|fp32] [BATCH (4)] [ATTENTION] [STORAGE]
set -euo pipefail
SHARDWISE_GPU_BENCH_MODEL=llama1b exec "$(dirname "$0")/gpu_gpt.sh" "$@"
