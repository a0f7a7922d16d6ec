#include "worker/model/llama_attention.h"

namespace shardwise::model {

void LlamaAttention::Rotate(const StageContext& context, Buffer& x, int64_t heads,
                            bool inverse) const {
  const DeviceBatch& batch = *context.batch;
  context.device->Rotary(x.data(), rotary_->cos(context), rotary_->sin(context), batch.rows,
                         batch.sequence_length, heads, m_.head_dim, inverse);
  context.Round(x);
}

Buffer LlamaAttention::Forward(const StageContext& context, const float* x, Saved* saved) const {
  const int64_t rows = context.batch->rows;
  Buffer q = m_.q_proj.Forward(context, x, rows);
  Buffer k = m_.k_proj.Forward(context, x, rows);
  Buffer v = m_.v_proj.Forward(context, x, rows);
  Rotate(context, q, m_.heads, /*inverse=*/false);
  Rotate(context, k, m_.kv_heads, /*inverse=*/false);
  saved->qkv = context.Activations(rows * 3 * m_.heads * m_.head_dim);
  context.device->PackGroupedQkv(q.data(), k.data(), v.data(), rows, m_.heads, m_.kv_heads,
                                 m_.head_dim, saved->qkv.data());
  q.Reset();
  k.Reset();
  v.Reset();
  core_.Forward(context, saved);
  return m_.o_proj.Forward(context, saved->out.data(), rows);
}

Buffer LlamaAttention::Backward(const StageContext& context, const float* x, Saved* saved,
                                const float* dy) const {
  const int64_t rows = context.batch->rows;
  Buffer dout = m_.o_proj.Backward(context, saved->out.data(), dy, rows, true);
  Buffer dqkv = core_.Backward(context, saved, dout.data());
  dout.Reset();
  saved->qkv.Reset();
  Buffer dq = context.Activations(rows * m_.heads * m_.head_dim);
  Buffer dk = context.Activations(rows * m_.kv_heads * m_.head_dim);
  Buffer dv = context.Activations(dk.numel());
  context.device->UnpackGroupedQkvGrad(dqkv.data(), rows, m_.heads, m_.kv_heads, m_.head_dim,
                                       dq.data(), dk.data(), dv.data());
  dqkv.Reset();
  context.Round(dk);
  context.Round(dv);
  Rotate(context, dq, m_.heads, /*inverse=*/true);
  Rotate(context, dk, m_.kv_heads, /*inverse=*/true);
  // x fed three projections: its gradient is the sum of theirs.
  Buffer dx = m_.q_proj.Backward(context, x, dq.data(), rows, true);
  dq.Reset();
  for (const auto& [projection, grad] :
       {std::make_pair(&m_.k_proj, &dk), std::make_pair(&m_.v_proj, &dv)}) {
    Buffer part = projection->Backward(context, x, grad->data(), rows, true);
    grad->Reset();
    context.AddRounded(dx, part);
  }
  return dx;
}

}  // namespace shardwise::model
