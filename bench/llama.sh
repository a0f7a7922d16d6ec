#!/usr/bin/env bash
# bench/gpt.sh for the Llama kind: a Llama of the GPT benchmark's size (4 layers, 256 wide,
# 128 context, 4 heads on 2 K/V heads, SwiGLU of width 688, tied head) against PyTorch DDP
# on tests/pytorch/llama.py's module, tokens/s and peak memory against the estimate,
# appended to bench/RESULTS.md.
# Usage: bench/llama.sh [WARMUP_STEPS] [TIMED_STEPS] [RUNS]   (defaults 3 30 3)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARDWISE_BENCH_MODEL=llama exec bench/gpt.sh "$@"
