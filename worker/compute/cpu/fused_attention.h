#ifndef SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_

// Fused (flash-style) causal self-attention on the CPU: the same function as attention.h
// with memory linear in seq (each query row's log-sum-exp instead of the probabilities).
// FlashAttention's algorithm (Dao et al. 2022) in tiles of kFusedAttentionTile query and
// key rows whose products are BLAS GEMMs: per query tile, for each key tile up to the
// diagonal, the scores, the online softmax's running max and sum, out += P v; the
// backward recomputes each tile's P from the lse and forms dv, dk and dq by GEMMs.
// Tiles above the diagonal are skipped, so it does half the materialised attention's
// score work. The GPU's kernels run compute/fused_attention_rows.h (one thread per row),
// the same function in another order of sums; fused_attention_test checks the two agree
// to rounding in float64.

#include <cstdint>

#include "worker/compute/attention_shape.h"

namespace shardwise::cpu {

// Query and key rows per tile: a tile's scores and their gradients (64 x 64 floats each)
// stay in cache, and the GEMMs on them are large enough for BLAS.
inline constexpr int64_t kFusedAttentionTile = 64;

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
