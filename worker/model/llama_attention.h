#ifndef SHARDWISE_WORKER_MODEL_LLAMA_ATTENTION_H_
#define SHARDWISE_WORKER_MODEL_LLAMA_ATTENTION_H_

// HF LlamaAttention: q = q_proj(x) [rows, heads head_dim], k = k_proj(x), v = v_proj(x)
// [rows, kv_heads head_dim]; rotary embeddings on q and k; K and V repeated to the query
// heads (repeat_kv) into the fused layout AttentionCore takes; causal softmax attention
// scaled by 1 / sqrt(head_dim); y = o_proj(out). The backward sums each K/V head's
// gradient over its query heads.

#include <cstdint>
#include <memory>

#include "worker/model/attention.h"
#include "worker/model/linear.h"
#include "worker/model/rotary.h"
#include "worker/model/stage.h"

namespace shardwise::model {

struct LlamaAttentionModules {
  Linear q_proj, k_proj, v_proj, o_proj;
  int64_t heads, kv_heads, head_dim;
  v1::GptConfig::Attention kind;
};

class LlamaAttention {
 public:
  LlamaAttention(const LlamaAttentionModules& m, std::shared_ptr<RotaryTables> rotary)
      : m_(m), core_(m.heads, m.head_dim, m.kind), rotary_(std::move(rotary)) {}

  using Saved = AttentionCore::Saved;
  // y [rows, hidden] from x [rows, hidden], rounded.
  Buffer Forward(const StageContext& context, const float* x, Saved* saved) const;
  // Adds the parameters' gradients; returns dx, rounded; frees `saved`.
  Buffer Backward(const StageContext& context, const float* x, Saved* saved, const float* dy) const;

 private:
  // Rotates `x` [rows, heads head_dim] in place (`inverse`: the backward), rounded.
  void Rotate(const StageContext& context, Buffer& x, int64_t heads, bool inverse) const;

  const LlamaAttentionModules m_;
  const AttentionCore core_;
  const std::shared_ptr<RotaryTables> rotary_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_LLAMA_ATTENTION_H_
