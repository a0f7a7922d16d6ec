#ifndef SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_

// Fused (flash-style) causal self-attention on the CPU: the row routines of
// compute/fused_attention_rows.h in plain loops, the same function as attention.h with
// memory linear in seq (each query row's log-sum-exp instead of the probabilities) and
// the scores computed twice more in the backward. No BLAS: slower than attention.h on a
// CPU; it is there for long contexts and as the reference the CUDA kernels are checked
// against.

#include "worker/compute/attention_shape.h"

namespace shardwise::cpu {

// qkv [batch, seq, 3C] -> out [batch, seq, C], lse [batch, heads, seq].
template <typename T>
void FusedAttentionForward(const T* qkv, const AttentionShape& shape, T* out, T* lse);

// Writes dqkv [batch, seq, 3C] from the forward's qkv, out and lse; `dots` [batch, heads,
// seq] is working space (each query row's dout . out).
template <typename T>
void FusedAttentionBackward(const T* qkv, const T* out, const T* lse, const T* dout,
                            const AttentionShape& shape, T* dots, T* dqkv);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_
