#ifndef SHARDWISE_CONTRACTS_CUDNN_ATTENTION_WORKSPACE_H_
#define SHARDWISE_CONTRACTS_CUDNN_ATTENTION_WORKSPACE_H_

// The workspace cuDNN's flash attention backward borrows per call on CUDA
// (worker/cuda/cudnn_attention_plan.h): the memory estimate budgets it and
// cudnn_attention_plan_test checks it against cuDNN's own plans for H100, H200 and A100.
//
// By default Shardwise asks for the deterministic backward (two runs bit for bit equal), which on
// these GPUs keeps dP, each head's score gradient, in 16 bits in the workspace: batch x
// heads x T (rounded up to 64) x T (rounded up to 128) x 2 bytes, quadratic in the
// sequence (PyTorch takes the same kernel while that is under 256 MB, and above it the
// one that accumulates dQ with atomics, which is not deterministic). With fewer K/V heads
// than query heads, each query head's K and V gradients before their group's sum add
// batch x heads x T x head_dim x 4 bytes. cuDNN 9.19's plans add at most 256 bytes of
// alignment to this (the atomic backward, 256 more: its accumulator starts at a 256-byte
// boundary after cuDNN's workspace). The forward's workspace is at most 256 bytes.

#include <cstdint>

namespace shardwise {

constexpr int64_t kCudnnWorkspaceAlignmentBytes = 256;

// The deterministic backward's, without the alignment.
constexpr int64_t CudnnAttentionBackwardWorkspaceBytes(int64_t batch, int64_t heads,
                                                       int64_t kv_heads, int64_t seq,
                                                       int64_t head_dim) {
  const int64_t rows = (seq + 63) / 64 * 64, columns = (seq + 127) / 128 * 128;
  const int64_t score_gradients = 2 * batch * heads * rows * columns;
  const int64_t group_gradients = kv_heads < heads ? 4 * batch * heads * seq * head_dim : 0;
  return score_gradients + group_gradients;
}

// The atomic backward's (cuda.attention_backward ATOMIC), what each call borrows at most,
// without the alignment: Shardwise's FP32 dQ accumulator (4 x batch x heads x T x
// head_dim bytes), and cuDNN's workspace beside it: on Ampere its own FP32 sums of dQ (as
// much again; on Hopper none) and, with grouped K/V heads, each query head's K/V
// gradients (as much again). Linear in the context. On the A100 without grouped K/V
// heads this is what cuDNN 9.19 takes to the byte (its sums as large as the accumulator),
// so the bound is tight there by design.
constexpr int64_t CudnnAttentionAtomicBackwardBytes(int64_t batch, int64_t heads, int64_t kv_heads,
                                                    int64_t seq, int64_t head_dim) {
  const int64_t query_gradient = 4 * batch * heads * seq * head_dim;
  return (kv_heads < heads ? 3 : 2) * query_gradient;
}

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_CUDNN_ATTENTION_WORKSPACE_H_
