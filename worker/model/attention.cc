#include "worker/model/attention.h"

namespace shardwise::model {

QkvSpan<TensorRef> AttentionCore::Span(const AttentionShape& shape, QkvBuffers& buffers) const {
  if (!separate_) return PackedQkvSpan(buffers.qkv.ref(), shape);
  return SeparateQkvSpan(buffers.q.ref(), buffers.k.ref(), buffers.v.ref(), shape, kv_heads_);
}

QkvBuffers AttentionCore::GradientBuffers(const StageContext& context, int64_t rows) const {
  QkvBuffers grads;
  if (!separate_) {
    grads.qkv = context.Activations(rows * 3 * heads_ * head_dim_);
    return grads;
  }
  grads.q = context.Activations(rows * heads_ * head_dim_);
  grads.k = context.Activations(rows * kv_heads_ * head_dim_);
  grads.v = context.Activations(rows * kv_heads_ * head_dim_);
  return grads;
}

void AttentionCore::Forward(const StageContext& context, Saved* saved) const {
  const AttentionShape shape = Shape(*context.batch);
  saved->out = context.Activations(shape.batch * shape.seq * shape.width());
  if (fused_) {
    saved->lse = context.FloatActivations(shape.batch * shape.heads * shape.seq);
    context.device->FusedAttentionForward(Span(shape, saved->qkv), shape, saved->out.ref(),
                                          saved->lse.data(), context.compute);
  } else {
    saved->probs = context.FloatActivations(shape.batch * shape.heads * shape.seq * shape.seq);
    context.device->AttentionForward(saved->qkv.qkv.ref(), shape, saved->out.ref(),
                                     saved->probs.data(), context.compute);
    context.Round(saved->probs);
  }
  context.Round(saved->out);
}

QkvBuffers AttentionCore::Backward(const StageContext& context, Saved* saved,
                                   ConstTensorRef dout) const {
  const AttentionShape shape = Shape(*context.batch);
  // The materialised backward no longer needs out; the fused one reads it (each row's
  // dout . out), so the fused path holds it until here.
  if (!fused_) saved->out.Reset();
  QkvBuffers grads = GradientBuffers(context, context.batch->rows);
  if (fused_) {
    context.device->FusedAttentionBackward(Span(shape, saved->qkv), saved->out.ref(),
                                           saved->lse.data(), dout, shape, Span(shape, grads),
                                           context.compute);
  } else {
    context.device->AttentionBackward(saved->qkv.qkv.ref(), saved->probs.data(), dout, shape,
                                      grads.qkv.ref(), context.compute);
  }
  for (Buffer* grad : {&grads.qkv, &grads.q, &grads.k, &grads.v}) {
    if (grad->numel() > 0) context.Round(*grad);  // the layout's buffers only
  }
  saved->out.Reset();
  saved->probs.Reset();
  saved->lse.Reset();
  return grads;
}

Buffer CausalSelfAttention::Forward(const StageContext& context, ConstTensorRef x,
                                    Saved* saved) const {
  const DeviceBatch& batch = *context.batch;
  saved->qkv.qkv = c_attn_.Forward(context, x, batch.rows);
  core_.Forward(context, saved);
  return c_proj_.Forward(context, saved->out.ref(), batch.rows);
}

Buffer CausalSelfAttention::Backward(const StageContext& context, ConstTensorRef x, Saved* saved,
                                     ConstTensorRef dy) const {
  const DeviceBatch& batch = *context.batch;
  Buffer dout = c_proj_.Backward(context, saved->out.ref(), dy, batch.rows, true);
  QkvBuffers grads = core_.Backward(context, saved, dout.ref());
  dout.Reset();
  Buffer dx = c_attn_.Backward(context, x, grads.qkv.ref(), batch.rows, true);
  saved->qkv = {};
  return dx;
}

}  // namespace shardwise::model
