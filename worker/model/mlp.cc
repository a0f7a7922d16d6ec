#include "worker/model/mlp.h"

namespace shardwise::model {

void MlpLayer::Forward(const StageContext& context, Flow& flow) {
  const int64_t rows = context.batch->rows;
  Buffer out =
      last_ ? linear_.Forward(context, flow.hidden.ref(), rows)
            : linear_.ForwardActivated(context, flow.hidden.ref(), rows, activation_, &preact_);
  input_ = std::move(flow.hidden);
  flow.hidden = std::move(out);
}

void MlpLayer::Backward(const StageContext& context, Flow& flow) {
  Buffer& grad = flow.grad;
  if (!last_) {
    // Through the activation that followed the Linear.
    context.device->ActivationBackward(activation_, preact_.ref(), grad.ref(), grad.numel(),
                                       grad.ref());
    context.Round(grad);
    preact_.Reset();
  }
  Buffer dx = linear_.Backward(context, input_.ref(), grad.ref(), context.batch->rows, !first_);
  input_.Reset();
  flow.grad = std::move(dx);
}

void MlpLayer::DropSaved() {
  input_.Reset();
  preact_.Reset();
}

}  // namespace shardwise::model
