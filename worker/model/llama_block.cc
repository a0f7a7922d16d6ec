#include "worker/model/llama_block.h"

namespace shardwise::model {

void LlamaBlock::Forward(const StageContext& context, Flow& flow) {
  const int64_t rows = context.batch->rows;
  x_ = std::move(flow.hidden);
  norm_1_out_ = m_.input_layernorm.Forward(context, x_.ref(), rows, &norm_1_);
  // x2 = attn + x in the branch's buffer (addition commutes: x + attn to the bit), and
  // its norm, in one pass where the device fuses them.
  x2_ = m_.self_attn.Forward(context, norm_1_out_.ref(), &attn_);
  norm_2_out_ =
      m_.post_attention_layernorm.AddForward(context, x2_.ref(), x_.ref(), rows, &norm_2_);
  flow.hidden = m_.mlp.Forward(context, norm_2_out_.ref(), &mlp_);
  context.AddRounded(flow.hidden, x2_);
}

void LlamaBlock::Backward(const StageContext& context, Flow& flow) {
  const int64_t rows = context.batch->rows;
  Buffer grad = m_.mlp.Backward(context, norm_2_out_.ref(), &mlp_, flow.grad.ref());
  norm_2_out_.Reset();
  // The gradient of x2: the output's, plus the branch's through its norm.
  Buffer residual = std::move(flow.grad);
  m_.post_attention_layernorm.BackwardAdd(context, x2_.ref(), norm_2_, grad.ref(), rows,
                                          residual.ref());
  grad.Reset();
  x2_.Reset();
  norm_2_ = {};
  grad = m_.self_attn.Backward(context, norm_1_out_.ref(), &attn_, residual.ref());
  norm_1_out_.Reset();
  m_.input_layernorm.BackwardAdd(context, x_.ref(), norm_1_, grad.ref(), rows, residual.ref());
  DropSaved();
  flow.grad = std::move(residual);
}

void LlamaBlock::DropSaved() {
  x_.Reset();
  norm_1_out_.Reset();
  norm_1_ = {};
  attn_ = {};
  x2_.Reset();
  norm_2_out_.Reset();
  norm_2_ = {};
  mlp_ = {};
}

}  // namespace shardwise::model
