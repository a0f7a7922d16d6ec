#ifndef SHARDWISE_WORKER_MODEL_ATTENTION_H_
#define SHARDWISE_WORKER_MODEL_ATTENTION_H_

// nanoGPT's CausalSelfAttention: qkv = c_attn(x) [rows, 3C], causal softmax attention per
// head, y = c_proj(out). The job's model.gpt.attention picks how the softmax is kept for
// the backward: MATERIALIZED keeps the probabilities (compute/device.h AttentionForward),
// FUSED each query row's log-sum-exp (FusedAttentionForward), memory linear in the
// sequence length.

#include <cstdint>

#include "proto/job_spec.pb.h"
#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class CausalSelfAttention {
 public:
  CausalSelfAttention(Linear c_attn, Linear c_proj, int64_t heads, v1::GptConfig::Attention kind)
      : c_attn_(c_attn), c_proj_(c_proj), heads_(heads), fused_(kind == v1::GptConfig::FUSED) {}

  struct Saved {
    Buffer qkv;    // [rows, 3C]
    Buffer probs;  // MATERIALIZED: [sequences, heads, length, length]
    Buffer lse;    // FUSED: [sequences, heads, length]
    Buffer out;    // [rows, C], before c_proj
  };
  // y [rows, C] from x [rows, C], rounded.
  Buffer Forward(const StageContext& context, const float* x, Saved* saved) const;
  // Adds the parameters' gradients; returns dx, rounded; frees `saved`.
  Buffer Backward(const StageContext& context, const float* x, Saved* saved, const float* dy) const;

 private:
  AttentionShape Shape(const DeviceBatch& batch) const {
    return {batch.sequences, batch.sequence_length, heads_, c_proj_.in() / heads_};
  }
  void AttentionForward(const StageContext& context, Saved* saved) const;
  Buffer AttentionBackward(const StageContext& context, Saved* saved, const float* dout) const;

  const Linear c_attn_, c_proj_;
  const int64_t heads_;
  const bool fused_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_ATTENTION_H_
