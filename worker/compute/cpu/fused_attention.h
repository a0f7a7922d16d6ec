#ifndef SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_

// Fused (flash-style) causal self-attention on the CPU: the same function as attention.h
// with memory linear in seq (each query row's log-sum-exp instead of the probabilities).
// FlashAttention's algorithm (Dao et al. 2022): per tile of query rows, for each block of
// keys up to the diagonal, the scores, the online softmax's running max and sum,
// out += P v; the backward per tile of keys, for each block of the queries that see it,
// P again from the lse, dP, dS, and dv, dk and dq. The products are tile_product.h's
// (AVX-512 register blocks that skip what lies above the diagonal, reading copies of the
// head's operands laid out for them; BLAS without AVX-512 and in double). It does one
// product more than the materialised attention (the scores again in the backward) and
// keeps its blocks in the core's cache where the materialised one writes and reads
// [seq, seq] per head: bench/attention_bench measures the two. The GPU's kernels run
// compute/fused_attention_rows.h (one thread per row), the same function in another
// order of sums; fused_attention_test checks the two agree to rounding in float64.

#include <cstdint>

#include "worker/compute/attention_shape.h"

namespace shardwise::cpu {

// The forward takes kFusedAttentionTile query rows at a time against up to
// kFusedAttentionBlock keys, the backward kFusedAttentionTile keys against up to
// kFusedAttentionBlock queries: a block's scores and their gradients (64 x 512 floats,
// 128 KiB each) stay in the core's cache. (Blocks of 256 or 1024, or tiles of 128 rows,
// ran within a few percent of these at contexts of 128 to 2048.)
inline constexpr int64_t kFusedAttentionTile = 64;
inline constexpr int64_t kFusedAttentionBlock = 512;

// The floats a thread keeps between calls for the float forward and backward at a
// context of `seq` and head size `head_dim`, outside the device's tensors: their blocks
// and each pass's copies of one head's operands. The memory estimate counts them
// (contracts/memory_estimate.h's KernelScratchBytes; fused_attention_test checks it
// holds at least this).
int64_t FusedAttentionScratchFloats(int64_t seq, int64_t head_dim);

// q, k, v (packed or apart, grouped or not: attention_shape.h's QkvSpan) -> out [batch,
// seq, C], lse [batch, heads, seq]. Each query head reads its K/V head in place: no copy
// per query head (grouped-query attention natively).
template <typename T>
void FusedAttentionForward(const QkvSpan<const T*>& qkv, const AttentionShape& shape, T* out,
                           T* lse);

// Writes dq, dk, dv (`dqkv`, laid out as `qkv`) from the forward's q, k, v, out and lse;
// `dots` [batch, heads, seq] is working space (each query row's dout . out). A K/V head's
// gradient is the sum of its query heads' in head order, as UnpackGroupedQkvGrad sums the
// packed layout's: the two layouts give the same bits.
template <typename T>
void FusedAttentionBackward(const QkvSpan<const T*>& qkv, const T* out, const T* lse, const T* dout,
                            const AttentionShape& shape, T* dots, const QkvSpan<T*>& dqkv);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_FUSED_ATTENTION_H_
