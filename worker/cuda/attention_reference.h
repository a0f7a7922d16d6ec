#ifndef SHARDWISE_WORKER_CUDA_ATTENTION_REFERENCE_H_
#define SHARDWISE_WORKER_CUDA_ATTENTION_REFERENCE_H_

// For the tests of cuDNN's attention (attention_graph_test on the CPU, cudnn_attention_test
// on a GPU): causal attention of separate q [batch, seq, heads * head_dim] and k, v
// [batch, seq, kv_heads * head_dim], with its log-sum-exp and gradients, computed by
// compute/cpu/fused_attention in double (each query head reading its group's K/V head, as
// Hugging Face's repeat_kv, the K/V gradients summed over each group).

#include <vector>

#include "worker/cuda/attention_graph.h"

namespace shardwise::cuda::testing {

struct AttentionValues {
  std::vector<double> q, k, v, dout;
};

struct AttentionResults {
  std::vector<double> out, stats, dots, dq, dk, dv;
};

// Values in [-1, 1) from `seed`, sized for `layout`.
AttentionValues RandomAttentionValues(const AttentionLayout& layout, unsigned seed);

// qkv [batch, seq, 3 * heads * head_dim], each query head with its group's K/V head.
std::vector<double> PackedQkv(const AttentionLayout& layout, const AttentionValues& values);

AttentionResults ReferenceAttention(const AttentionLayout& layout, const AttentionValues& values);

}  // namespace shardwise::cuda::testing

#endif  // SHARDWISE_WORKER_CUDA_ATTENTION_REFERENCE_H_
