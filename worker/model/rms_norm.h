#ifndef SHARDWISE_WORKER_MODEL_RMS_NORM_H_
#define SHARDWISE_WORKER_MODEL_RMS_NORM_H_

// The Llama's RMSNorm (HF LlamaRMSNorm: a weight, no bias, no mean subtracted) over a
// stage's parameters: y = w * x / sqrt(mean(x^2) + eps) (compute/device.h RmsNormForward).

#include <cstdint>

#include "worker/model/stage.h"

namespace shardwise::model {

class RmsNorm {
 public:
  RmsNorm(int weight, int64_t dim, float eps) : weight_(weight), dim_(dim), eps_(eps) {}

  struct Saved {
    Buffer rstd;  // per row
  };
  // y [rows, dim], rounded; `saved` keeps 1/rms for the backward.
  Buffer Forward(const StageContext& context, ConstTensorRef x, int64_t rows, Saved* saved) const;
  // Adds dw to the weight's gradient; returns dx, rounded.
  Buffer Backward(const StageContext& context, ConstTensorRef x, const Saved& saved,
                  ConstTensorRef dy, int64_t rows) const;
  // As LayerNorm's (layer_norm.h): the residual sum, then the norm of it.
  Buffer AddForward(const StageContext& context, TensorRef x, ConstTensorRef residual, int64_t rows,
                    Saved* saved) const;
  void BackwardAdd(const StageContext& context, ConstTensorRef x, const Saved& saved,
                   ConstTensorRef dy, int64_t rows, TensorRef dresidual) const;

 private:
  const int weight_;
  const int64_t dim_;
  const float eps_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_RMS_NORM_H_
