#include "worker/model/attention.h"

namespace shardwise::model {

Buffer CausalSelfAttention::Forward(const StageContext& context, const float* x,
                                    Saved* saved) const {
  const DeviceBatch& batch = *context.batch;
  saved->qkv = c_attn_.Forward(context, x, batch.rows);
  saved->out = context.Activations(batch.rows * c_proj_.in());
  saved->probs = context.Activations(batch.sequences * heads_ * batch.sequence_length *
                                     batch.sequence_length);
  context.device->AttentionForward(saved->qkv.data(), batch.sequences, batch.sequence_length,
                                   heads_, head_dim(), saved->out.data(), saved->probs.data(),
                                   context.compute);
  context.Round(saved->probs);
  context.Round(saved->out);
  return c_proj_.Forward(context, saved->out.data(), batch.rows);
}

Buffer CausalSelfAttention::Backward(const StageContext& context, const float* x, Saved* saved,
                                     const float* dy) const {
  const DeviceBatch& batch = *context.batch;
  Buffer dout = c_proj_.Backward(context, saved->out.data(), dy, batch.rows, true);
  saved->out.Reset();
  Buffer dqkv = context.Activations(saved->qkv.numel());
  context.device->AttentionBackward(saved->qkv.data(), saved->probs.data(), dout.data(),
                                    batch.sequences, batch.sequence_length, heads_, head_dim(),
                                    dqkv.data(), context.compute);
  context.Round(dqkv);
  saved->probs.Reset();
  dout.Reset();
  Buffer dx = c_attn_.Backward(context, x, dqkv.data(), batch.rows, true);
  saved->qkv.Reset();
  return dx;
}

}  // namespace shardwise::model
