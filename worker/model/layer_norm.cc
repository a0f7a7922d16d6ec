#include "worker/model/layer_norm.h"

namespace shardwise::model {

Buffer LayerNorm::Forward(const StageContext& context, ConstTensorRef x, int64_t rows,
                          Saved* saved) const {
  Buffer y = context.Activations(rows * dim_);
  saved->mean = context.FloatActivations(rows);
  saved->rstd = context.FloatActivations(rows);
  const ParameterTable& params = *context.params;
  context.device->LayerNormForward(x, params.value(weight_),
                                   bias_ >= 0 ? params.value(bias_) : nullptr, rows, dim_, kEps,
                                   y.ref(), saved->mean.data(), saved->rstd.data());
  context.Round(y);
  return y;
}

Buffer LayerNorm::Backward(const StageContext& context, ConstTensorRef x, const Saved& saved,
                           ConstTensorRef dy, int64_t rows) const {
  Buffer dx = context.Activations(rows * dim_);
  const ParameterTable& params = *context.params;
  context.device->LayerNormBackward(x, params.value(weight_), saved.mean.data(), saved.rstd.data(),
                                    dy, rows, dim_, dx.ref(), params.grad(weight_),
                                    bias_ >= 0 ? params.grad(bias_) : nullptr);
  context.Round(dx);
  return dx;
}

Buffer LayerNorm::AddForward(const StageContext& context, TensorRef x, ConstTensorRef residual,
                             int64_t rows, Saved* saved) const {
  Buffer y = context.Activations(rows * dim_);
  saved->mean = context.FloatActivations(rows);
  saved->rstd = context.FloatActivations(rows);
  const ParameterTable& params = *context.params;
  context.device->AddLayerNormForward(
      x, residual, params.value(weight_), bias_ >= 0 ? params.value(bias_) : nullptr, rows, dim_,
      kEps, y.ref(), saved->mean.data(), saved->rstd.data(), context.compute);
  return y;
}

void LayerNorm::BackwardAdd(const StageContext& context, ConstTensorRef x, const Saved& saved,
                            ConstTensorRef dy, int64_t rows, TensorRef dresidual) const {
  const ParameterTable& params = *context.params;
  context.device->LayerNormBackwardAdd(
      x, params.value(weight_), saved.mean.data(), saved.rstd.data(), dy, rows, dim_, dresidual,
      params.grad(weight_), bias_ >= 0 ? params.grad(bias_) : nullptr, context.compute);
}

}  // namespace shardwise::model
