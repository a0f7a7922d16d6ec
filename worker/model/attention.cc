#include "worker/model/attention.h"

namespace shardwise::model {

void AttentionCore::Forward(const StageContext& context, Saved* saved) const {
  const AttentionShape shape = Shape(*context.batch);
  saved->out = context.Activations(shape.batch * shape.seq * shape.width());
  if (fused_) {
    saved->lse = context.Activations(shape.batch * shape.heads * shape.seq);
    context.device->FusedAttentionForward(saved->qkv.data(), shape, saved->out.data(),
                                          saved->lse.data(), context.compute);
  } else {
    saved->probs = context.Activations(shape.batch * shape.heads * shape.seq * shape.seq);
    context.device->AttentionForward(saved->qkv.data(), shape, saved->out.data(),
                                     saved->probs.data(), context.compute);
    context.Round(saved->probs);
  }
  context.Round(saved->out);
}

Buffer AttentionCore::Backward(const StageContext& context, Saved* saved, const float* dout) const {
  const AttentionShape shape = Shape(*context.batch);
  // The materialised backward no longer needs out; the fused one reads it (each row's
  // dout . out), so the fused path holds it until here.
  if (!fused_) saved->out.Reset();
  Buffer dqkv = context.Activations(saved->qkv.numel());
  if (fused_) {
    context.device->FusedAttentionBackward(saved->qkv.data(), saved->out.data(), saved->lse.data(),
                                           dout, shape, dqkv.data(), context.compute);
  } else {
    context.device->AttentionBackward(saved->qkv.data(), saved->probs.data(), dout, shape,
                                      dqkv.data(), context.compute);
  }
  context.Round(dqkv);
  saved->out.Reset();
  saved->probs.Reset();
  saved->lse.Reset();
  return dqkv;
}

Buffer CausalSelfAttention::Forward(const StageContext& context, const float* x,
                                    Saved* saved) const {
  const DeviceBatch& batch = *context.batch;
  saved->qkv = c_attn_.Forward(context, x, batch.rows);
  core_.Forward(context, saved);
  return c_proj_.Forward(context, saved->out.data(), batch.rows);
}

Buffer CausalSelfAttention::Backward(const StageContext& context, const float* x, Saved* saved,
                                     const float* dy) const {
  const DeviceBatch& batch = *context.batch;
  Buffer dout = c_proj_.Backward(context, saved->out.data(), dy, batch.rows, true);
  Buffer dqkv = core_.Backward(context, saved, dout.data());
  dout.Reset();
  Buffer dx = c_attn_.Backward(context, x, dqkv.data(), batch.rows, true);
  saved->qkv.Reset();
  return dx;
}

}  // namespace shardwise::model
