#ifndef SHARDWISE_WORKER_MODEL_ATTENTION_H_
#define SHARDWISE_WORKER_MODEL_ATTENTION_H_

// Causal softmax attention over a fused qkv [rows, 3 heads head_dim] (AttentionCore), and
// nanoGPT's CausalSelfAttention around it: qkv = c_attn(x) [rows, 3C], y = c_proj(out).
// The job's attention kind picks how the softmax is kept for the backward: MATERIALIZED
// keeps the probabilities (compute/device.h AttentionForward), FUSED each query row's
// log-sum-exp (FusedAttentionForward), memory linear in the sequence length.

#include <cstdint>

#include "proto/job_spec.pb.h"
#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class AttentionCore {
 public:
  AttentionCore(int64_t heads, int64_t head_dim, v1::GptConfig::Attention kind)
      : heads_(heads), head_dim_(head_dim), fused_(kind == v1::GptConfig::FUSED) {}

  struct Saved {
    Buffer qkv;    // [rows, 3 heads head_dim]
    Buffer probs;  // MATERIALIZED: [sequences, heads, length, length]
    Buffer lse;    // FUSED: [sequences, heads, length]
    Buffer out;    // [rows, heads head_dim]
  };
  // out from qkv (both in `saved`), rounded.
  void Forward(const StageContext& context, Saved* saved) const;
  // Frees out, probs and lse (not qkv); returns dqkv, rounded.
  Buffer Backward(const StageContext& context, Saved* saved, const float* dout) const;

 private:
  AttentionShape Shape(const DeviceBatch& batch) const {
    return {batch.sequences, batch.sequence_length, heads_, head_dim_};
  }

  const int64_t heads_, head_dim_;
  const bool fused_;
};

class CausalSelfAttention {
 public:
  CausalSelfAttention(Linear c_attn, Linear c_proj, int64_t heads, v1::GptConfig::Attention kind)
      : c_attn_(c_attn), c_proj_(c_proj), core_(heads, c_proj.in() / heads, kind) {}

  using Saved = AttentionCore::Saved;
  // y [rows, C] from x [rows, C], rounded.
  Buffer Forward(const StageContext& context, const float* x, Saved* saved) const;
  // Adds the parameters' gradients; returns dx, rounded; frees `saved`.
  Buffer Backward(const StageContext& context, const float* x, Saved* saved, const float* dy) const;

 private:
  const Linear c_attn_, c_proj_;
  const AttentionCore core_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_ATTENTION_H_
