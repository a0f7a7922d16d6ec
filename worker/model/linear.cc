#include "worker/model/linear.h"

namespace shardwise::model {

Buffer Linear::Forward(const StageContext& context, ConstTensorRef x, int64_t rows) const {
  Buffer y = context.Activations(rows * out_);
  const ParameterTable& params = *context.params;
  context.device->LinearForward(x, params.value(weight_),
                                bias_ >= 0 ? params.value(bias_) : nullptr, rows, in_, out_,
                                y.ref(), context.compute);
  context.Round(y);
  return y;
}

Buffer Linear::ForwardActivated(const StageContext& context, ConstTensorRef x, int64_t rows,
                                v1::Activation act, Buffer* pre) const {
  *pre = context.Activations(rows * out_);
  const ParameterTable& params = *context.params;
  return context.device->LinearActivationForward(act, x, params.value(weight_),
                                                 bias_ >= 0 ? params.value(bias_) : nullptr, rows,
                                                 in_, out_, pre->ref(), context.compute);
}

Buffer Linear::Backward(const StageContext& context, ConstTensorRef x, ConstTensorRef dy,
                        int64_t rows, bool input_grad) const {
  Buffer dx;
  if (input_grad) dx = context.Activations(rows * in_);
  const ParameterTable& params = *context.params;
  context.device->LinearBackward(x, params.value(weight_), dy, rows, in_, out_,
                                 input_grad ? dx.ref() : nullptr, params.grad(weight_),
                                 bias_ >= 0 ? params.grad(bias_) : nullptr, context.compute);
  if (input_grad) context.Round(dx);
  return dx;
}

Buffer Linear::BackwardActivated(const StageContext& context, ConstTensorRef x, ConstTensorRef pre,
                                 v1::Activation act, ConstTensorRef dy, int64_t rows) const {
  Buffer dpre = context.Activations(rows * in_);
  const ParameterTable& params = *context.params;
  context.device->ActivationLinearBackward(
      act, pre, x, params.value(weight_), dy, rows, in_, out_, dpre.ref(), params.grad(weight_),
      bias_ >= 0 ? params.grad(bias_) : nullptr, context.compute);
  return dpre;
}

}  // namespace shardwise::model
