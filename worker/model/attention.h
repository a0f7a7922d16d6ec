#ifndef SHARDWISE_WORKER_MODEL_ATTENTION_H_
#define SHARDWISE_WORKER_MODEL_ATTENTION_H_

// nanoGPT's CausalSelfAttention: qkv = c_attn(x) [rows, 3C], causal softmax attention per
// head (compute/device.h AttentionForward), y = c_proj(out).

#include <cstdint>

#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class CausalSelfAttention {
 public:
  CausalSelfAttention(Linear c_attn, Linear c_proj, int64_t heads)
      : c_attn_(c_attn), c_proj_(c_proj), heads_(heads) {}

  struct Saved {
    Buffer qkv;    // [rows, 3C]
    Buffer probs;  // [sequences, heads, length, length]
    Buffer out;    // [rows, C], before c_proj
  };
  // y [rows, C] from x [rows, C], rounded.
  Buffer Forward(const StageContext& context, const float* x, Saved* saved) const;
  // Adds the parameters' gradients; returns dx, rounded; frees `saved`.
  Buffer Backward(const StageContext& context, const float* x, Saved* saved,
                  const float* dy) const;

 private:
  int64_t head_dim() const { return c_proj_.in() / heads_; }
  const Linear c_attn_, c_proj_;
  const int64_t heads_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_ATTENTION_H_
