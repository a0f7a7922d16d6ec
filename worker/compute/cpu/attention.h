#ifndef SHARDWISE_WORKER_COMPUTE_CPU_ATTENTION_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_ATTENTION_H_

// Causal multi-head self-attention on the CPU, as nanoGPT's CausalSelfAttention computes
// it without flash attention, from the fused projection qkv [batch, seq, 3 * C]
// (q, k, v side by side, each C = heads * head_dim wide, head h at columns h * head_dim):
//   S = (q_h k_h^T) * (1 / sqrt(head_dim)),  P = softmax over j <= i (j > i masked),
//   out_h = P v_h,   out [batch, seq, C] with head h at columns h * head_dim.
// P [batch, heads, seq, seq] is kept for the backward (zeros above the diagonal).
// Softmax as PyTorch's CPU kernel: exp(s - max) * (1 / sum), the sums over 16 lanes
// (lane_sum.h). Backward:
//   dP = dout_h v_h^T, dv_h = P^T dout_h,
//   dS = P * (dP - rowsum(dP * P)) * scale, dq_h = dS k_h, dk_h = dS^T q_h.

#include <cstdint>

namespace shardwise::cpu {

template <typename T>
void AttentionForward(const T* qkv, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                      T* out, T* probs);

// dqkv [batch, seq, 3 * C] is written.
template <typename T>
void AttentionBackward(const T* qkv, const T* probs, const T* dout, int64_t batch, int64_t seq,
                       int64_t heads, int64_t head_dim, T* dqkv);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_ATTENTION_H_
