#include "worker/model/mlp.h"

namespace shardwise::model {

void MlpLayer::Forward(const StageContext& context, Flow& flow) {
  Buffer out = linear_.Forward(context, flow.hidden.ref(), context.batch->rows);
  input_ = std::move(flow.hidden);
  if (last_) {
    flow.hidden = std::move(out);
    return;
  }
  Buffer activated = context.Activations(out.numel());
  context.device->ActivationForward(activation_, out.ref(), out.numel(), activated.ref());
  context.Round(activated);
  preact_ = std::move(out);
  flow.hidden = std::move(activated);
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
