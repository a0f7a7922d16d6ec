#include "worker/model/block.h"

namespace shardwise::model {

void Block::Forward(const StageContext& context, Flow& flow) {
  const int64_t rows = context.batch->rows;
  x_ = std::move(flow.hidden);
  ln_1_out_ = m_.ln_1.Forward(context, x_.ref(), rows, &ln_1_);
  // x2 = attn + x in the branch's buffer: no copy of x (addition commutes, so the sum is
  // x + attn to the bit), and ln_2 of it, in one pass where the device fuses them.
  x2_ = m_.attn.Forward(context, ln_1_out_.ref(), &attn_);
  ln_2_out_ = m_.ln_2.AddForward(context, x2_.ref(), x_.ref(), rows, &ln_2_);
  act_out_ = m_.c_fc.ForwardActivated(context, ln_2_out_.ref(), rows, m_.activation, &fc_out_);
  flow.hidden = m_.c_proj.Forward(context, act_out_.ref(), rows);
  context.AddRounded(flow.hidden, x2_);
}

void Block::Backward(const StageContext& context, Flow& flow) {
  const int64_t rows = context.batch->rows;
  // The MLP branch.
  Buffer grad = m_.c_proj.BackwardActivated(context, act_out_.ref(), fc_out_.ref(), m_.activation,
                                            flow.grad.ref(), rows);
  act_out_.Reset();
  fc_out_.Reset();
  grad = m_.c_fc.Backward(context, ln_2_out_.ref(), grad.ref(), rows, true);
  ln_2_out_.Reset();
  // The gradient of x2: the output's, plus the branch's through ln_2.
  Buffer residual = std::move(flow.grad);
  m_.ln_2.BackwardAdd(context, x2_.ref(), ln_2_, grad.ref(), rows, residual.ref());
  grad.Reset();
  x2_.Reset();
  ln_2_ = {};
  // The attention branch.
  grad = m_.attn.Backward(context, ln_1_out_.ref(), &attn_, residual.ref());
  ln_1_out_.Reset();
  m_.ln_1.BackwardAdd(context, x_.ref(), ln_1_, grad.ref(), rows, residual.ref());
  DropSaved();
  flow.grad = std::move(residual);
}

void Block::DropSaved() {
  x_.Reset();
  ln_1_out_.Reset();
  ln_1_ = {};
  attn_ = {};
  x2_.Reset();
  ln_2_out_.Reset();
  fc_out_.Reset();
  act_out_.Reset();
  ln_2_ = {};
}

}  // namespace shardwise::model
