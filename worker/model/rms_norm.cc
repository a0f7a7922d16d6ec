#include "worker/model/rms_norm.h"

namespace shardwise::model {

Buffer RmsNorm::Forward(const StageContext& context, ConstTensorRef x, int64_t rows,
                        Saved* saved) const {
  Buffer y = context.Activations(rows * dim_);
  saved->rstd = context.FloatActivations(rows);
  context.device->RmsNormForward(x, context.params->value(weight_), rows, dim_, eps_, y.ref(),
                                 saved->rstd.data());
  context.Round(y);
  return y;
}

Buffer RmsNorm::Backward(const StageContext& context, ConstTensorRef x, const Saved& saved,
                         ConstTensorRef dy, int64_t rows) const {
  Buffer dx = context.Activations(rows * dim_);
  const ParameterTable& params = *context.params;
  context.device->RmsNormBackward(x, params.value(weight_), saved.rstd.data(), dy, rows, dim_,
                                  dx.ref(), params.grad(weight_));
  context.Round(dx);
  return dx;
}

Buffer RmsNorm::AddForward(const StageContext& context, TensorRef x, ConstTensorRef residual,
                           int64_t rows, Saved* saved) const {
  Buffer y = context.Activations(rows * dim_);
  saved->rstd = context.FloatActivations(rows);
  context.device->AddRmsNormForward(x, residual, context.params->value(weight_), rows, dim_, eps_,
                                    y.ref(), saved->rstd.data(), context.compute);
  return y;
}

void RmsNorm::BackwardAdd(const StageContext& context, ConstTensorRef x, const Saved& saved,
                          ConstTensorRef dy, int64_t rows, TensorRef dresidual) const {
  const ParameterTable& params = *context.params;
  context.device->RmsNormBackwardAdd(x, params.value(weight_), saved.rstd.data(), dy, rows, dim_,
                                     dresidual, params.grad(weight_), context.compute);
}

}  // namespace shardwise::model
