#ifndef SHARDWISE_WORKER_COMPUTE_CPU_VECTOR_CLONES_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_VECTOR_CLONES_H_

// SHARDWISE_VECTOR_CLONES before a function: its loops compiled for AVX-512, for AVX2 and
// for the x86-64 baseline (SSE2), the widest the CPU runs picked as the program loads
// (target_clones: an ifunc). The kernels themselves build for the baseline, which every
// x86-64 CPU runs, so without this a loop uses 4 of a 16-float register.
//
// Every clone computes the same results: the CPU kernels build with -ffp-contract=off
// (compute/cpu/BUILD), so no clone fuses a multiply and an add into one FMA (AVX-512
// brings FMA with it), and without -ffast-math a loop is vectorised only where that keeps
// each element's operations and their order, sums included (which run in explicit lanes
// where they vectorise at all, as layer_norm.cc's do).
//
// A clone calls what it does not inline in its default form: the bodies it runs are
// inline functions (always_inline where they are large).

#if defined(__x86_64__)
#define SHARDWISE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SHARDWISE_VECTOR_CLONES
#endif

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_VECTOR_CLONES_H_
