#include "worker/model/llama_attention.h"

namespace shardwise::model {

void LlamaAttention::Rotate(const StageContext& context, Buffer& x, int64_t heads,
                            bool inverse) const {
  const DeviceBatch& batch = *context.batch;
  context.device->Rotary(x.ref(), rotary_->cos(context), rotary_->sin(context), batch.rows,
                         batch.sequence_length, heads, m_.head_dim, inverse);
  context.Round(x);
}

Buffer LlamaAttention::Forward(const StageContext& context, ConstTensorRef x, Saved* saved) const {
  const int64_t rows = context.batch->rows;
  Buffer q = m_.q_proj.Forward(context, x, rows);
  Buffer k = m_.k_proj.Forward(context, x, rows);
  Buffer v = m_.v_proj.Forward(context, x, rows);
  Rotate(context, q, m_.heads, /*inverse=*/false);
  Rotate(context, k, m_.kv_heads, /*inverse=*/false);
  if (m_.kind == v1::GptConfig::FUSED) {
    saved->qkv.q = std::move(q);
    saved->qkv.k = std::move(k);
    saved->qkv.v = std::move(v);
  } else {
    saved->qkv.qkv = context.Activations(rows * 3 * m_.heads * m_.head_dim);
    context.device->PackGroupedQkv(q.ref(), k.ref(), v.ref(), rows, m_.heads, m_.kv_heads,
                                   m_.head_dim, saved->qkv.qkv.ref());
  }
  core_.Forward(context, saved);
  return m_.o_proj.Forward(context, saved->out.ref(), rows);
}

QkvBuffers LlamaAttention::Unpacked(const StageContext& context, QkvBuffers grads) const {
  if (grads.qkv.numel() == 0) return grads;  // FUSED's: apart already
  const int64_t rows = context.batch->rows;
  QkvBuffers apart;
  apart.q = context.Activations(rows * m_.heads * m_.head_dim);
  apart.k = context.Activations(rows * m_.kv_heads * m_.head_dim);
  apart.v = context.Activations(apart.k.numel());
  context.device->UnpackGroupedQkvGrad(grads.qkv.ref(), rows, m_.heads, m_.kv_heads, m_.head_dim,
                                       apart.q.ref(), apart.k.ref(), apart.v.ref());
  context.Round(apart.k);
  context.Round(apart.v);
  return apart;
}

Buffer LlamaAttention::Backward(const StageContext& context, ConstTensorRef x, Saved* saved,
                                ConstTensorRef dy) const {
  const int64_t rows = context.batch->rows;
  Buffer dout = m_.o_proj.Backward(context, saved->out.ref(), dy, rows, true);
  QkvBuffers grads = core_.Backward(context, saved, dout.ref());
  dout.Reset();
  saved->qkv = {};
  grads = Unpacked(context, std::move(grads));
  Rotate(context, grads.q, m_.heads, /*inverse=*/true);
  Rotate(context, grads.k, m_.kv_heads, /*inverse=*/true);
  // x fed three projections: its gradient is the sum of theirs.
  Buffer dx = m_.q_proj.Backward(context, x, grads.q.ref(), rows, true);
  grads.q.Reset();
  for (const auto& [projection, grad] :
       {std::make_pair(&m_.k_proj, &grads.k), std::make_pair(&m_.v_proj, &grads.v)}) {
    Buffer part = projection->Backward(context, x, grad->ref(), rows, true);
    grad->Reset();
    context.AddRounded(dx, part);
  }
  return dx;
}

}  // namespace shardwise::model
