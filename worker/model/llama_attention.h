#ifndef SHARDWISE_WORKER_MODEL_LLAMA_ATTENTION_H_
#define SHARDWISE_WORKER_MODEL_LLAMA_ATTENTION_H_

// HF LlamaAttention: q = q_proj(x) [rows, heads head_dim], k = k_proj(x), v = v_proj(x)
// [rows, kv_heads head_dim]; rotary embeddings on q and k; causal softmax attention
// scaled by 1 / sqrt(head_dim); y = o_proj(out). The backward sums each K/V head's
// gradient over its query heads. FUSED reads each K/V head in place for its group of
// query heads (grouped-query attention natively); MATERIALIZED first repeats K and V to
// the query heads (HF's repeat_kv) into the packed layout its attention takes.

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
      : m_(m),
        core_(m.kind == v1::GptConfig::FUSED
                  ? AttentionCore::Separate(m.heads, m.kv_heads, m.head_dim)
                  : AttentionCore(m.heads, m.head_dim, m.kind)),
        rotary_(std::move(rotary)) {}

  using Saved = AttentionCore::Saved;
  // y [rows, hidden] from x [rows, hidden], rounded.
  Buffer Forward(const StageContext& context, ConstTensorRef x, Saved* saved) const;
  // Adds the parameters' gradients; returns dx, rounded; frees `saved`.
  Buffer Backward(const StageContext& context, ConstTensorRef x, Saved* saved,
                  ConstTensorRef dy) const;

 private:
  // Rotates `x` [rows, heads head_dim] in place (`inverse`: the backward), rounded.
  void Rotate(const StageContext& context, Buffer& x, int64_t heads, bool inverse) const;
  // The gradients of q, k and v apart (the K/V heads' summed over their groups), rounded,
  // from the core's in its layout.
  QkvBuffers Unpacked(const StageContext& context, QkvBuffers grads) const;

  const LlamaAttentionModules m_;
  const AttentionCore core_;
  const std::shared_ptr<RotaryTables> rotary_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_LLAMA_ATTENTION_H_
