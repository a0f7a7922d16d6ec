#ifndef SHARDWISE_WORKER_MODEL_LAYER_NORM_H_
#define SHARDWISE_WORKER_MODEL_LAYER_NORM_H_

// nn.LayerNorm (nanoGPT's, with an optional bias; eps 1e-5) over a stage's parameters
// (the GPT's final LayerNorm, transformer.ln_f, is a NormStage of it: norm_stage.h).

#include <cstdint>

#include "worker/model/stage.h"

namespace shardwise::model {

class LayerNorm {
 public:
  static constexpr float kEps = 1e-5f;
  // Parameter indices (bias -1: none).
  LayerNorm(int weight, int bias, int64_t dim) : weight_(weight), bias_(bias), dim_(dim) {}

  struct Saved {
    Buffer mean, rstd;  // per row
  };
  // y [rows, dim], rounded; `saved` keeps the statistics for the backward.
  Buffer Forward(const StageContext& context, ConstTensorRef x, int64_t rows, Saved* saved) const;
  // Adds dw, db to the parameters' gradients; returns dx, rounded.
  Buffer Backward(const StageContext& context, ConstTensorRef x, const Saved& saved,
                  ConstTensorRef dy, int64_t rows) const;
  // A pre-norm block's residual sum and this norm of it (Device::AddLayerNormForward):
  // x += residual, rounded; returns the norm of that sum as Forward does.
  Buffer AddForward(const StageContext& context, TensorRef x, ConstTensorRef residual, int64_t rows,
                    Saved* saved) const;
  // Backward, its dx added to `dresidual` (rounded) instead of returned.
  void BackwardAdd(const StageContext& context, ConstTensorRef x, const Saved& saved,
                   ConstTensorRef dy, int64_t rows, TensorRef dresidual) const;

 private:
  const int weight_, bias_;
  const int64_t dim_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_LAYER_NORM_H_
