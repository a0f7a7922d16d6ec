#ifndef SHARDWISE_WORKER_CUDA_KERNELS_H_
#define SHARDWISE_WORKER_CUDA_KERNELS_H_

// The FSDP runtime's elementwise and reduction kernels on CUDA: the GPU counterparts of
// compute/casts.h, compute/cpu/ (but the GEMMs, which are in blas.h) and the
// optimizers of fsdp/optimizer.h, with the same formulas. Every function enqueues its work
// on `stream` and returns the launch's error (cudaSuccess when it was enqueued); pointers
// are device pointers unless a comment says otherwise.
//
// Reductions (losses, norms) are deterministic: fixed-shape trees, no atomics, so the same
// inputs give the same bits on every run.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "worker/compute/optimizer_scalars.h"
#include "worker/compute/update_spans.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

// FP32 -> FP16/BF16 (round to nearest even, as PyTorch's .to()) and back (exact). FP32
// copies. Vectorised: four elements per thread and load where the pointers allow.
cudaError_t Narrow(ScalarType type, const float* in, uint16_t* out, size_t n, cudaStream_t stream);
cudaError_t Widen(ScalarType type, const uint16_t* in, float* out, size_t n, cudaStream_t stream);
// Rounds FP32 values in place to the type's precision (FP32: nothing).
cudaError_t RoundToPrecision(ScalarType type, float* data, size_t n, cudaStream_t stream);

// y[i, :] = b for every row i of y[rows, cols] (a GEMM with beta = 1 then adds x W^T);
// b and y each FP32 or 16-bit (storage_elements.cuh: the values converted exactly, or
// rounded once). cudaErrorInvalidValue for another type.
cudaError_t BroadcastRows(ConstTensorRef b, int64_t rows, int64_t cols, TensorRef y,
                          cudaStream_t stream);
// db[cols] += column sums of dy[rows, cols] (a Linear layer's bias gradient; dy FP32 or
// 16-bit), summed in double by 32 row lanes per column, deterministically.
cudaError_t AddColumnSums(ConstTensorRef dy, int64_t rows, int64_t cols, float* db,
                          cudaStream_t stream);

// GELU: the exact (erf) form, torch's default; GELU_TANH its tanh approximation; SILU
// x * sigmoid(x) (the Llama MLP's gate).
enum class Activation { kRelu, kGelu, kGeluTanh, kSilu };
// y = act(x); dx = dy * act'(x) (dx may alias dy). The arguments share one type, FP32 or
// 16-bit (computed in float, each output rounded once as stored), else
// cudaErrorInvalidValue.
cudaError_t ActivationForward(Activation act, ConstTensorRef x, size_t n, TensorRef y,
                              cudaStream_t stream);
cudaError_t ActivationBackward(Activation act, ConstTensorRef x, ConstTensorRef dy, size_t n,
                               TensorRef dx, cudaStream_t stream);

// Mean cross-entropy of logits[batch, classes] against labels[batch] (int64):
// dlogits = (softmax - onehot) * scale / batch, and *loss = mean loss * scale (one double
// on the device). `row_loss` is working space of `batch` doubles. logits and dlogits are
// of one type, FP32 or 16-bit (computed in float, the gradient rounded once as stored).
cudaError_t CrossEntropy(ConstTensorRef logits, const int64_t* labels, int64_t batch,
                         int64_t classes, float scale, TensorRef dlogits, double* row_loss,
                         double* loss, cudaStream_t stream);
// Mean squared error over batch*out elements: dpred = 2 (pred - target) * scale / n,
// *loss = mean * scale. `partials` is working space of ReductionPartials(n) doubles. pred
// and dpred are of one type, FP32 or 16-bit, target of any of them (computed in float, the
// gradient rounded once as stored), else cudaErrorInvalidValue.
cudaError_t MeanSquaredError(ConstTensorRef pred, ConstTensorRef target, int64_t n, float scale,
                             TensorRef dpred, double* partials, double* loss, cudaStream_t stream);

// Gradient clipping, all on the device (compute/device.h): *sum (one double) += the sum
// of squares of x[n], deterministically (`partials` as above); out[n] = in[n] as FP32;
// x[n] *= pointwise::ClipCoefficient(*squared_norm, max_norm) where that is below 1 (for
// x holding `values` of a 16-bit type: the coefficient and each product rounded to it).
size_t ReductionPartials(size_t n);
cudaError_t AddSquaredNorm(const float* x, size_t n, double* partials, double* sum,
                           cudaStream_t stream);
cudaError_t DoubleToFloat(const double* in, float* out, size_t n, cudaStream_t stream);
cudaError_t ClipToNorm(float* x, size_t n, const float* squared_norm, double max_norm,
                       ScalarType values, cudaStream_t stream);

// dst[i] += src[i] (a reduced gradient into the saved shard, or a residual's sum): dst and
// src of one type, FP32 or 16-bit (the sum in float, rounded once as stored).
cudaError_t Accumulate(TensorRef dst, ConstTensorRef src, size_t n, cudaStream_t stream);
// x *= scale, and *found_inf = 1 if any result is inf or NaN (left unchanged otherwise):
// the loss scaler's unscale.
cudaError_t ScaleAndCheckFinite(float* x, size_t n, float scale, int* found_inf,
                                cudaStream_t stream);

// torch.optim.SGD on elements [0, n) (one parameter range): with momentum, `momentum_buf`
// is the range's buffer and `first` says it is still uninitialised (copied from the
// gradient, as PyTorch does on a parameter's first step).
cudaError_t SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad,
                      float* momentum_buf, size_t n, cudaStream_t stream);
// torch.optim.AdamW (single-tensor path).
cudaError_t AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                        float* exp_avg_sq, size_t n, cudaStream_t stream);
// The same on a table's spans of one shard in one launch (pointers at the shard's start;
// spans without decay take none).
cudaError_t AdamWUpdateSpans(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                             float* exp_avg_sq, const SpanTable& table, cudaStream_t stream);

// data *= factor / data /= divisor (the divisions of gradient reduction are divisions,
// as in PyTorch, not multiplications by a reciprocal).
cudaError_t Multiply(float* data, size_t n, float factor, cudaStream_t stream);
cudaError_t Divide(float* data, size_t n, float divisor, cudaStream_t stream);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_KERNELS_H_
