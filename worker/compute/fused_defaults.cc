// Device's defaults for the operations a device may fuse (device.h): a Linear with its
// activation, a residual sum with its norm. Each is the unfused sequence the model ran
// before they existed, so a device without a fused kernel (the CPU, the stream checker,
// CUDA's FP32 storage of 16-bit values) gives the same bits as it did.

#include "worker/compute/device.h"

namespace shardwise {
namespace {

// Rounds `values` to `compute` where they are stored in FP32; a 16-bit buffer holds such
// values already.
void RoundStored(Device& device, ScalarType compute, TensorRef values, size_t n) {
  if (values.is_float()) device.RoundToPrecision(compute, values.f32(), n);
}

// dresidual += dx, rounded: dx was written (and rounded) in dresidual's storage type.
void AddRounded(Device& device, ScalarType compute, TensorRef dresidual, Buffer& dx, size_t n) {
  RoundStored(device, compute, dx.ref(), n);
  device.Accumulate(dresidual, dx.ref(), n);
  RoundStored(device, compute, dresidual, n);
}

}  // namespace

Buffer Device::LinearActivationForward(v1::Activation act, ConstTensorRef x, ConstTensorRef w,
                                       ConstTensorRef b, int64_t batch, int64_t in, int64_t out,
                                       TensorRef pre, ScalarType operands) {
  const size_t n = static_cast<size_t>(batch * out);
  LinearForward(x, w, b, batch, in, out, pre, operands);
  RoundStored(*this, operands, pre, n);
  // After the Linear, whose operand copies (on devices that make them) are gone by now.
  Buffer y(allocator(), n, MemoryCategory::kActivations, pre.type(), /*zero=*/false);
  ActivationForward(act, pre, n, y.ref());
  RoundStored(*this, operands, y.ref(), n);
  return y;
}

void Device::ActivationLinearBackward(v1::Activation act, ConstTensorRef pre, ConstTensorRef x,
                                      ConstTensorRef w, ConstTensorRef dy, int64_t batch,
                                      int64_t in, int64_t out, TensorRef dpre, float* dw, float* db,
                                      ScalarType operands) {
  const size_t n = static_cast<size_t>(batch * in);
  LinearBackward(x, w, dy, batch, in, out, dpre, dw, db, operands);
  RoundStored(*this, operands, dpre, n);
  ActivationBackward(act, pre, dpre, n, dpre);
  RoundStored(*this, operands, dpre, n);
}

void Device::AddLayerNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w,
                                 ConstTensorRef b, int64_t rows, int64_t dim, float eps,
                                 TensorRef y, float* mean, float* rstd, ScalarType compute) {
  const size_t n = static_cast<size_t>(rows * dim);
  Accumulate(x, residual, n);
  RoundStored(*this, compute, x, n);
  LayerNormForward(x, w, b, rows, dim, eps, y, mean, rstd);
  RoundStored(*this, compute, y, n);
}

void Device::LayerNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                  const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                                  TensorRef dresidual, float* dw, float* db, ScalarType compute) {
  const size_t n = static_cast<size_t>(rows * dim);
  // Freed on this thread's stream after the operations that use it were issued.
  Buffer dx(allocator(), n, MemoryCategory::kActivations, dresidual.type(), /*zero=*/false);
  LayerNormBackward(x, w, mean, rstd, dy, rows, dim, dx.ref(), dw, db);
  AddRounded(*this, compute, dresidual, dx, n);
}

void Device::AddRmsNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w, int64_t rows,
                               int64_t dim, float eps, TensorRef y, float* rstd,
                               ScalarType compute) {
  const size_t n = static_cast<size_t>(rows * dim);
  Accumulate(x, residual, n);
  RoundStored(*this, compute, x, n);
  RmsNormForward(x, w, rows, dim, eps, y, rstd);
  RoundStored(*this, compute, y, n);
}

void Device::RmsNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                                ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dresidual,
                                float* dw, ScalarType compute) {
  const size_t n = static_cast<size_t>(rows * dim);
  Buffer dx(allocator(), n, MemoryCategory::kActivations, dresidual.type(), /*zero=*/false);
  RmsNormBackward(x, w, rstd, dy, rows, dim, dx.ref(), dw);
  AddRounded(*this, compute, dresidual, dx, n);
}

}  // namespace shardwise
