#ifndef SHARDWISE_WORKER_MODEL_ATTENTION_H_
#define SHARDWISE_WORKER_MODEL_ATTENTION_H_

// Causal softmax attention (AttentionCore) over q, k and v packed into qkv [rows, 3 heads
// head_dim] or apart (grouped-query attention, FUSED only), and nanoGPT's
// CausalSelfAttention around it: qkv = c_attn(x) [rows, 3C], y = c_proj(out). The job's
// attention kind picks how the softmax is kept for the backward: MATERIALIZED keeps the
// probabilities (compute/device.h AttentionForward), FUSED each query row's log-sum-exp
// (FusedAttentionForward), memory linear in the sequence length.

#include <cstdint>

#include "proto/job_spec.pb.h"
#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

// q, k and v of one attention call, or their gradients: packed in `qkv` (the GPT's
// c_attn output; the Llama's under MATERIALIZED, K and V repeated to the query heads), or
// apart in q [rows, heads head_dim] and k, v [rows, kv_heads head_dim] (the Llama's under
// FUSED, each K/V head read in place by its group of query heads).
struct QkvBuffers {
  Buffer qkv;
  Buffer q, k, v;
};

class AttentionCore {
 public:
  // Over q, k and v packed.
  AttentionCore(int64_t heads, int64_t head_dim, v1::GptConfig::Attention kind)
      : AttentionCore(heads, heads, head_dim, kind, /*separate=*/false) {}
  // Over q, k and v apart, K and V with `kv_heads` heads: FUSED's grouped-query
  // attention (the materialised attention takes the packed layout).
  static AttentionCore Separate(int64_t heads, int64_t kv_heads, int64_t head_dim) {
    return AttentionCore(heads, kv_heads, head_dim, v1::GptConfig::FUSED, /*separate=*/true);
  }

  struct Saved {
    QkvBuffers qkv;  // as the core's layout
    Buffer probs;    // MATERIALIZED: [sequences, heads, length, length]
    Buffer lse;      // FUSED: [sequences, heads, length]
    Buffer out;      // [rows, heads head_dim]
  };
  // out from q, k and v (both in `saved`), rounded.
  void Forward(const StageContext& context, Saved* saved) const;
  // Frees out, probs and lse (not q, k, v); returns the gradients of q, k and v in their
  // layout, rounded (a K/V head's: the sum over its query heads, rounded once).
  QkvBuffers Backward(const StageContext& context, Saved* saved, ConstTensorRef dout) const;

 private:
  AttentionCore(int64_t heads, int64_t kv_heads, int64_t head_dim, v1::GptConfig::Attention kind,
                bool separate)
      : heads_(heads),
        kv_heads_(kv_heads),
        head_dim_(head_dim),
        fused_(kind == v1::GptConfig::FUSED),
        separate_(separate) {}

  AttentionShape Shape(const DeviceBatch& batch) const {
    return {batch.sequences, batch.sequence_length, heads_, head_dim_};
  }
  // Where `buffers` hold q, k and v in this core's layout.
  QkvSpan<TensorRef> Span(const AttentionShape& shape, QkvBuffers& buffers) const;
  // Buffers for the gradients of q, k and v at `rows` rows, in this core's layout.
  QkvBuffers GradientBuffers(const StageContext& context, int64_t rows) const;

  const int64_t heads_, kv_heads_, head_dim_;
  const bool fused_, separate_;
};

class CausalSelfAttention {
 public:
  CausalSelfAttention(Linear c_attn, Linear c_proj, int64_t heads, v1::GptConfig::Attention kind)
      : c_attn_(c_attn), c_proj_(c_proj), core_(heads, c_proj.in() / heads, kind) {}

  using Saved = AttentionCore::Saved;
  // y [rows, C] from x [rows, C], rounded.
  Buffer Forward(const StageContext& context, ConstTensorRef x, Saved* saved) const;
  // Adds the parameters' gradients; returns dx, rounded; frees `saved`.
  Buffer Backward(const StageContext& context, ConstTensorRef x, Saved* saved,
                  ConstTensorRef dy) const;

 private:
  const Linear c_attn_, c_proj_;
  const AttentionCore core_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_ATTENTION_H_
