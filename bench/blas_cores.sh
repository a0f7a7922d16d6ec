# shellcheck shell=bash
# Sourced by bench/gpt.sh and bench/run.sh: which OpenBLAS kernels each side of a run
# uses. Shardwise's programs restart onto kernels as wide as the CPU where OpenBLAS does
# not know it (worker/compute/cpu/blas_kernels.h); PyTorch as installed keeps the
# library's own pick. The benchmarks give PyTorch Shardwise's kernels, so that both sides
# run the same GEMMs, and measure PyTorch as installed beside it where the two differ.

# blas_ours BIN_DIR: the core Shardwise's ranks run ($OPENBLAS_CORETYPE where it is set).
blas_ours() {
  "$1/bench/gpt_bench" 0 0 blas | awk '$1 == "blas" {print $2}'
}

# blas_installed: the core OpenBLAS picks for PyTorch with no $OPENBLAS_CORETYPE.
blas_installed() {
  env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 /usr/bin/python3 -c "import torch" 2>&1 |
    sed -n 's/^Core: //p' | tail -1
}
