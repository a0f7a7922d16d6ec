#ifndef SHARDWISE_WORKER_MODEL_LINEAR_H_
#define SHARDWISE_WORKER_MODEL_LINEAR_H_

// nn.Linear over a stage's parameters: y = x W^T + b, W [out, in] (compute/device.h).

#include <cstdint>

#include "worker/model/stage.h"

namespace shardwise::model {

class Linear {
 public:
  // `weight` and `bias` are parameter indices (bias -1: none).
  Linear(int weight, int bias, int64_t in, int64_t out)
      : weight_(weight), bias_(bias), in_(in), out_(out) {}

  // y [rows, out], rounded to the compute type.
  Buffer Forward(const StageContext& context, ConstTensorRef x, int64_t rows) const;
  // act(y) [rows, out], keeping y in `*pre` for the activation's backward; in one GEMM
  // where the device fuses them (Device::LinearActivationForward).
  Buffer ForwardActivated(const StageContext& context, ConstTensorRef x, int64_t rows,
                          v1::Activation act, Buffer* pre) const;
  // Adds dW (and db) to the parameters' gradients; returns dx [rows, in], rounded, when
  // `input_grad` (else an empty buffer).
  Buffer Backward(const StageContext& context, ConstTensorRef x, ConstTensorRef dy, int64_t rows,
                  bool input_grad) const;
  // The same for an input x = act(pre), returning the gradient of pre [rows, in] instead
  // of x's; in one GEMM where the device fuses them (Device::ActivationLinearBackward).
  Buffer BackwardActivated(const StageContext& context, ConstTensorRef x, ConstTensorRef pre,
                           v1::Activation act, ConstTensorRef dy, int64_t rows) const;

  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  const int weight_, bias_;
  const int64_t in_, out_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_LINEAR_H_
