#include "worker/model/lm_head.h"

namespace shardwise::model {

void LmHead::Forward(const StageContext& context, Flow& flow) {
  Buffer logits = linear_.Forward(context, flow.hidden.ref(), context.batch->rows);
  input_ = std::move(flow.hidden);
  flow.hidden = std::move(logits);
}

void LmHead::Backward(const StageContext& context, Flow& flow) {
  flow.grad = linear_.Backward(context, input_.ref(), flow.grad.ref(), context.batch->rows, true);
  input_.Reset();
}

}  // namespace shardwise::model
