// The CPU's causal self-attention alone, forward and backward on one core: the fused
// (flash-style) kernels against the materialised ones in the same run, at the GPT
// benchmark's shape (2 sequences, 4 heads of 64) and the contexts it trains at.
// Prints "ATTENTION seq materialized_ms fused_ms speedup materialized_GFLOPs
// fused_GFLOPs", speedup = materialized_ms / fused_ms, each the best of 6 rounds of one
// forward plus one backward (the first touches the memory); GFLOP/s counts the causal
// products' work (the 2 forward and 4 backward products over the lower triangle).
// Usage: attention_bench [seq ...] (default 128 1024 2048).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/best_seconds.h"
#include "worker/compute/attention_shape.h"
#include "worker/compute/cpu/attention.h"
#include "worker/compute/cpu/blas_kernels.h"
#include "worker/compute/cpu/fused_attention.h"
#include "worker/compute/cpu/gemm.h"

namespace {

using shardwise::AttentionShape;
using shardwise::bench::BestSeconds;
namespace cpu = shardwise::cpu;

std::vector<float> Pseudorandom(size_t n, unsigned seed) {
  std::vector<float> values(n);
  for (float& value : values) {
    seed = seed * 1664525u + 1013904223u;
    value = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  return values;
}

void Measure(const AttentionShape& shape) {
  const size_t rows = shape.batch * shape.seq;
  const size_t stats = shape.batch * shape.heads * shape.seq;
  const std::vector<float> qkv = Pseudorandom(rows * 3 * shape.width(), 1);
  const std::vector<float> dout = Pseudorandom(rows * shape.width(), 2);
  std::vector<float> out(rows * shape.width()), dqkv(rows * 3 * shape.width());
  std::vector<float> probs(stats * shape.seq), lse(stats), dots(stats);
  const double materialized = BestSeconds(6, [&] {
    cpu::AttentionForward(qkv.data(), shape.batch, shape.seq, shape.heads, shape.head_dim,
                          out.data(), probs.data());
    cpu::AttentionBackward(qkv.data(), probs.data(), dout.data(), shape.batch, shape.seq,
                           shape.heads, shape.head_dim, dqkv.data());
  });
  const double fused = BestSeconds(6, [&] {
    cpu::FusedAttentionForward(PackedQkvSpan(qkv.data(), shape), shape, out.data(), lse.data());
    cpu::FusedAttentionBackward(PackedQkvSpan(qkv.data(), shape), out.data(), lse.data(),
                                dout.data(), shape, dots.data(), PackedQkvSpan(dqkv.data(), shape));
  });
  // Six products of [seq, seq/2 on average] x head_dim, two FLOPs per multiply-add.
  const double flops = 6.0 * 2.0 * shape.batch * shape.heads * shape.head_dim *
                       (static_cast<double>(shape.seq) * (shape.seq + 1) / 2);
  std::printf("ATTENTION %lld %.3f %.3f %.2f %.1f %.1f\n", static_cast<long long>(shape.seq),
              materialized * 1e3, fused * 1e3, materialized / fused, flops / materialized / 1e9,
              flops / fused / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  cpu::RestartOnBetterBlasKernels(argv);
  std::vector<long long> contexts = {128, 1024, 2048};
  if (argc > 1) contexts.clear();
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const long long seq = std::strtoll(argv[i], &end, 10);
    if (*end != '\0' || seq <= 0) {
      std::fprintf(stderr, "context '%s' is not a positive whole number\n", argv[i]);
      return 2;
    }
    contexts.push_back(seq);
  }
  cpu::SetBlasThreads(1);  // one core, as each rank of a CPU job has
  std::printf("blas %s\n", cpu::BlasCoreName().c_str());
  for (long long seq : contexts) Measure(AttentionShape{2, seq, 4, 64});
  return 0;
}
