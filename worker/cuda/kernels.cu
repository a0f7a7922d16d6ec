#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "worker/compute/pointwise.h"
#include "worker/cuda/kernel_support.cuh"
#include "worker/cuda/kernels.h"
#include "worker/cuda/storage_elements.cuh"

namespace shardwise::cuda {
namespace {

// The launch shapes and block reductions every kernel file uses.
using namespace internal;  // NOLINT(build/namespaces)

// Reductions: at most this many first-pass blocks (their partials are summed by one block).
constexpr size_t kMaxPartials = 1024;

// ---- casts ----------------------------------------------------------------------------

__device__ __forceinline__ uint16_t ToHalfBits(float v) {
  return __half_as_ushort(__float2half_rn(v));
}
__device__ __forceinline__ uint16_t ToBFloat16Bits(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ float FromHalfBits(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}
__device__ __forceinline__ float FromBFloat16Bits(uint16_t bits) {
  return __bfloat162float(__ushort_as_bfloat16(bits));
}

template <bool kBFloat16>
__device__ __forceinline__ uint16_t NarrowOne(float v) {
  return kBFloat16 ? ToBFloat16Bits(v) : ToHalfBits(v);
}
template <bool kBFloat16>
__device__ __forceinline__ float WidenOne(uint16_t bits) {
  return kBFloat16 ? FromBFloat16Bits(bits) : FromHalfBits(bits);
}

// Four elements per thread: one 16-byte load and one 8-byte store (the pointers are
// aligned when the caller's are: checked before launching), then the tail one by one.
template <bool kBFloat16>
__global__ void NarrowKernel(const float* __restrict__ in, uint16_t* __restrict__ out, size_t n,
                             bool vector) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t quads = n / 4;
    for (size_t q = first; q < quads; q += stride) {
      const float4 v = reinterpret_cast<const float4*>(in)[q];
      ushort4 r;
      r.x = NarrowOne<kBFloat16>(v.x);
      r.y = NarrowOne<kBFloat16>(v.y);
      r.z = NarrowOne<kBFloat16>(v.z);
      r.w = NarrowOne<kBFloat16>(v.w);
      reinterpret_cast<ushort4*>(out)[q] = r;
    }
    done = quads * 4;
  }
  for (size_t i = done + first; i < n; i += stride) out[i] = NarrowOne<kBFloat16>(in[i]);
}

template <bool kBFloat16>
__global__ void WidenKernel(const uint16_t* __restrict__ in, float* __restrict__ out, size_t n,
                            bool vector) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t quads = n / 4;
    for (size_t q = first; q < quads; q += stride) {
      const ushort4 v = reinterpret_cast<const ushort4*>(in)[q];
      reinterpret_cast<float4*>(out)[q] =
          make_float4(WidenOne<kBFloat16>(v.x), WidenOne<kBFloat16>(v.y), WidenOne<kBFloat16>(v.z),
                      WidenOne<kBFloat16>(v.w));
    }
    done = quads * 4;
  }
  for (size_t i = done + first; i < n; i += stride) out[i] = WidenOne<kBFloat16>(in[i]);
}

template <bool kBFloat16>
__global__ void RoundKernel(float* data, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    data[i] = WidenOne<kBFloat16>(NarrowOne<kBFloat16>(data[i]));
  }
}

bool Aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// ---- elementwise ----------------------------------------------------------------------

template <typename B, typename Y>
__global__ void BroadcastRowsKernel(const B* b, int64_t rows, int64_t cols, Y* y) {
  const size_t n = static_cast<size_t>(rows) * cols;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    StoreFloat(y, i, LoadFloat(b, i % cols));
  }
}

// A block is kColumnTile columns x kRowLanes row lanes: thread (x, y) sums rows y,
// y + kRowLanes, ... of its column in double (a warp reads 32 consecutive floats of one
// row), then the lanes' sums are added in a fixed tree: no scratch, no atomics, the same
// bits on every run, and 32x the threads of one per column (8192 x 768 took 3 blocks).
constexpr int kColumnTile = 32, kRowLanes = 32;

// Launched with kColumnTile * kRowLanes = 1024 threads: the bound keeps ptxas within the
// registers a block that size may have (a launch would fail past them).
template <typename T>
__global__ void __launch_bounds__(kColumnTile* kRowLanes)
    AddColumnSumsKernel(const T* dy, int64_t rows, int64_t cols, float* db) {
  __shared__ double lanes[kRowLanes][kColumnTile];
  const int x = threadIdx.x, y = threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnTile + x;
  double sum = 0;
  if (j < cols) {
    for (int64_t i = y; i < rows; i += kRowLanes) sum += LoadFloat(dy, i * cols + j);
  }
  lanes[y][x] = sum;
  __syncthreads();
  for (int width = kRowLanes / 2; width > 0; width /= 2) {
    if (y < width) lanes[y][x] += lanes[y + width][x];
    __syncthreads();
  }
  if (y == 0 && j < cols) db[j] += static_cast<float>(lanes[0][x]);
}

// Activations in float with the device's erff, tanhf and expf (compute/pointwise.h's
// *Float forms, as PyTorch's CUDA kernels compute them), not in double: FP64 runs at a
// fraction of FP32's rate on most GPUs, and the double form cost 3.9 ms of a GPT-2 step.
__device__ __forceinline__ float Activated(Activation act, float x) {
  switch (act) {
    case Activation::kGelu:
      return pointwise::GeluFloat(x);
    case Activation::kGeluTanh:
      return pointwise::GeluTanhFloat(x);
    case Activation::kSilu:
      return pointwise::SiluFloat(x);
    default:
      return x > 0.0f ? x : 0.0f;
  }
}

__device__ __forceinline__ float ActivationGradient(Activation act, float x, float dy) {
  switch (act) {
    case Activation::kGelu:
      return dy * pointwise::GeluGradFloat(x);
    case Activation::kGeluTanh:
      return dy * pointwise::GeluTanhGradFloat(x);
    case Activation::kSilu:
      return dy * pointwise::SiluGradFloat(x);
    default:
      return x > 0.0f ? dy : 0.0f;
  }
}

// The elementwise kernels read and write their storage type T (storage_elements.cuh).
template <typename T>
__global__ void ActivationForwardKernel(Activation act, const T* x, size_t n, T* y) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    StoreFloat(y, i, Activated(act, LoadFloat(x, i)));
  }
}

template <typename T>
__global__ void ActivationBackwardKernel(Activation act, const T* x, const T* dy, size_t n, T* dx) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    StoreFloat(dx, i, ActivationGradient(act, LoadFloat(x, i), LoadFloat(dy, i)));
  }
}

template <typename T>
__global__ void AccumulateKernel(T* dst, const T* src, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    StoreFloat(dst, i, LoadFloat(dst, i) + LoadFloat(src, i));
  }
}

__global__ void MultiplyKernel(float* data, size_t n, float factor) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    data[i] *= factor;
  }
}

__global__ void DivideKernel(float* data, size_t n, float divisor) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    data[i] /= divisor;  // IEEE division (nvcc's default -prec-div=true)
  }
}

__global__ void ScaleAndCheckFiniteKernel(float* x, size_t n, float scale, int* found_inf) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  bool bad = false;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    bad |= pointwise::UnscaleAndCheckNonFinite(x + i, scale);
  }
  // Any thread may set the flag: it only ever goes from 0 to 1, so order does not matter.
  if (bad) *found_inf = 1;
}

// ---- deterministic reductions ---------------------------------------------------------

// partials[b] = the sum of squares of block b's grid-stride share.
__global__ void SquaresPartialKernel(const float* x, size_t n, double* partials) {
  double sum = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    sum += static_cast<double>(x[i]) * x[i];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// *out = factor * the sum of values[n] (added to *out with `add`), by one block.
__global__ void FinalSumKernel(const double* values, size_t n, double factor, double* out,
                               bool add = false) {
  double sum = 0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) sum += values[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *out = (add ? *out : 0.0) + sum * factor;
}

__global__ void DoubleToFloatKernel(const double* in, float* out, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = static_cast<float>(in[i]);
  }
}

// Every thread computes the coefficient from the one value: cheaper than a launch to
// compute it once, and the same bits everywhere.
// kRounding: 0 keeps FP32; 1 rounds the coefficient and each product to BF16, 2 to FP16
// (gradients holding values of that type), as the CPU device does.
template <int kRounding>
__device__ __forceinline__ float RoundedAs(float v) {
  if constexpr (kRounding == 0) {
    return v;
  } else {
    return WidenOne<kRounding == 1>(NarrowOne<kRounding == 1>(v));
  }
}

template <int kRounding>
__global__ void ClipToNormKernel(float* x, size_t n, const float* squared_norm, double max_norm) {
  const float coef = pointwise::ClipCoefficient(*squared_norm, max_norm);
  if (coef >= 1.0f) return;
  const float scale = RoundedAs<kRounding>(coef);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    x[i] = RoundedAs<kRounding>(x[i] * scale);
  }
}

// pred and dpred in their storage type P, target in its own U (the model's targets stay
// FP32 in either storage): the difference in float, its gradient rounded once as stored.
template <typename P, typename U>
__global__ void MeanSquaredErrorKernel(const P* pred, const U* target, size_t n, float grad_scale,
                                       P* dpred, double* partials) {
  double sum = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float diff = LoadFloat(pred, i) - LoadFloat(target, i);
    sum += static_cast<double>(diff) * diff;
    StoreFloat(dpred, i, diff * grad_scale);
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block per row: the row's max, its log-sum-exp and loss, and its gradient, in float
// as PyTorch's CUDA kernels (pointwise.h's SoftmaxTerm, LogSumExp, CrossEntropyGradient),
// with logits and gradient in their storage type T. dlogits may be logits: each thread
// writes only the elements it read, after the block-wide reductions (which synchronise),
// and the label's logit is read before.
template <typename T>
__global__ void CrossEntropyKernel(const T* logits, const int64_t* labels, int64_t classes,
                                   float grad_scale, T* dlogits, double* row_loss) {
  const T* row = logits + blockIdx.x * classes;
  T* grad = dlogits + blockIdx.x * classes;
  const int64_t label = labels[blockIdx.x];
  const bool in_range = label >= 0 && label < classes;
  const float label_logit = in_range ? LoadFloat(row, label) : 0.0f;
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) max = fmaxf(max, LoadFloat(row, j));
  max = BlockMax(max);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    sum += pointwise::SoftmaxTerm(LoadFloat(row, j), max);
  }
  sum = BlockSum(sum);
  const double log_sum = pointwise::LogSumExp(sum, max);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    StoreFloat(grad, j,
               pointwise::CrossEntropyGradient(LoadFloat(row, j), log_sum, j == label, grad_scale));
  }
  // As the CPU's (cpu/losses.cc): a label outside [0, classes) gives NaN, never a read
  // outside the row.
  if (threadIdx.x == 0) row_loss[blockIdx.x] = in_range ? log_sum - label_logit : NAN;
}

// ---- optimizers -----------------------------------------------------------------------

__global__ void SgdKernel(SgdScalars o, bool first, float* p, const float* grad, float* buf,
                          size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    pointwise::SgdStep(o, first, p + i, grad[i], buf != nullptr ? buf + i : nullptr);
  }
}

__global__ void AdamWKernel(AdamWScalars s, float* p, const float* grad, float* m, float* v,
                            size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    pointwise::AdamWStep(s, p + i, grad[i], m + i, v + i);
  }
}

// One launch over a table's spans (update_spans.h); `undecayed` is `s` without decay.
__global__ void AdamWSpansKernel(AdamWScalars s, AdamWScalars undecayed, SpanTable table, float* p,
                                 const float* grad, float* m, float* v) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < table.total();
       k += stride) {
    const int span = SpanOf(table, k);
    const int64_t i = table.begin[span] + (k - table.first[span]);
    pointwise::AdamWStep(table.decay[span] ? s : undecayed, p + i, grad[i], m + i, v + i);
  }
}

}  // namespace

cudaError_t Narrow(ScalarType type, const float* in, uint16_t* out, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool vector = Aligned(in, 16) && Aligned(out, 8);
  const unsigned blocks = Blocks(vector ? (n + 3) / 4 : n);
  if (type == ScalarType::kBFloat16) {
    NarrowKernel<true><<<blocks, kThreads, 0, stream>>>(in, out, n, vector);
  } else if (type == ScalarType::kFloat16) {
    NarrowKernel<false><<<blocks, kThreads, 0, stream>>>(in, out, n, vector);
  } else {
    return cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  }
  return Launched();
}

cudaError_t Widen(ScalarType type, const uint16_t* in, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool vector = Aligned(in, 8) && Aligned(out, 16);
  const unsigned blocks = Blocks(vector ? (n + 3) / 4 : n);
  if (type == ScalarType::kBFloat16) {
    WidenKernel<true><<<blocks, kThreads, 0, stream>>>(in, out, n, vector);
  } else if (type == ScalarType::kFloat16) {
    WidenKernel<false><<<blocks, kThreads, 0, stream>>>(in, out, n, vector);
  } else {
    return cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  }
  return Launched();
}

cudaError_t RoundToPrecision(ScalarType type, float* data, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (type == ScalarType::kBFloat16) {
    RoundKernel<true><<<Blocks(n), kThreads, 0, stream>>>(data, n);
  } else if (type == ScalarType::kFloat16) {
    RoundKernel<false><<<Blocks(n), kThreads, 0, stream>>>(data, n);
  } else {
    return cudaSuccess;
  }
  return Launched();
}

cudaError_t BroadcastRows(ConstTensorRef b, int64_t rows, int64_t cols, TensorRef y,
                          cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  const bool typed = WithStoredTypes(b.type(), y.type(), [&](auto* b_type, auto* y_type) {
    using B = std::remove_pointer_t<decltype(b_type)>;
    using Y = std::remove_pointer_t<decltype(y_type)>;
    BroadcastRowsKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(
        static_cast<const B*>(b.data()), rows, cols, static_cast<Y*>(y.data()));
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t AddColumnSums(ConstTensorRef dy, int64_t rows, int64_t cols, float* db,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const unsigned tiles = static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile);
  const bool typed = WithStoredType(dy.type(), [&](auto* dy_type) {
    using T = std::remove_pointer_t<decltype(dy_type)>;
    AddColumnSumsKernel<<<tiles, dim3(kColumnTile, kRowLanes), 0, stream>>>(
        static_cast<const T*>(dy.data()), rows, cols, db);
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t ActivationForward(Activation act, ConstTensorRef x, size_t n, TensorRef y,
                              cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool typed = WithSharedStoredType({x.type(), y.type()}, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ActivationForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(
        act, static_cast<const T*>(x.data()), n, static_cast<T*>(y.data()));
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t ActivationBackward(Activation act, ConstTensorRef x, ConstTensorRef dy, size_t n,
                               TensorRef dx, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool typed = WithSharedStoredType({x.type(), dy.type(), dx.type()}, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ActivationBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(
        act, static_cast<const T*>(x.data()), static_cast<const T*>(dy.data()), n,
        static_cast<T*>(dx.data()));
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t CrossEntropy(ConstTensorRef logits, const int64_t* labels, int64_t batch,
                         int64_t classes, float scale, TensorRef dlogits, double* row_loss,
                         double* loss, cudaStream_t stream) {
  if (batch == 0) return cudaMemsetAsync(loss, 0, sizeof(double), stream);
  if (logits.type() != dlogits.type()) return cudaErrorInvalidValue;
  const float grad_scale = scale / static_cast<float>(batch);
  const bool typed = WithStoredType(logits.type(), [&](auto* logits_type) {
    using T = std::remove_pointer_t<decltype(logits_type)>;
    CrossEntropyKernel<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(
        static_cast<const T*>(logits.data()), labels, classes, grad_scale,
        static_cast<T*>(dlogits.data()), row_loss);
  });
  if (!typed) return cudaErrorInvalidValue;
  FinalSumKernel<<<1, kThreads, 0, stream>>>(row_loss, batch, static_cast<double>(scale) / batch,
                                             loss);
  return Launched();
}

size_t ReductionPartials(size_t n) {
  return std::max<size_t>(1, std::min(kMaxPartials, (n + kThreads - 1) / kThreads));
}

cudaError_t MeanSquaredError(ConstTensorRef pred, ConstTensorRef target, int64_t n, float scale,
                             TensorRef dpred, double* partials, double* loss, cudaStream_t stream) {
  if (n == 0) return cudaMemsetAsync(loss, 0, sizeof(double), stream);
  if (pred.type() != dpred.type()) return cudaErrorInvalidValue;
  const size_t blocks = ReductionPartials(n);
  const float grad_scale = 2.0f * scale / static_cast<float>(n);
  const bool typed =
      WithStoredTypes(pred.type(), target.type(), [&](auto* pred_type, auto* target_type) {
        using P = std::remove_pointer_t<decltype(pred_type)>;
        using U = std::remove_pointer_t<decltype(target_type)>;
        MeanSquaredErrorKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            static_cast<const P*>(pred.data()), static_cast<const U*>(target.data()), n, grad_scale,
            static_cast<P*>(dpred.data()), partials);
      });
  if (!typed) return cudaErrorInvalidValue;
  FinalSumKernel<<<1, kThreads, 0, stream>>>(partials, blocks, static_cast<double>(scale) / n,
                                             loss);
  return Launched();
}

cudaError_t AddSquaredNorm(const float* x, size_t n, double* partials, double* sum,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const size_t blocks = ReductionPartials(n);
  SquaresPartialKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, partials);
  FinalSumKernel<<<1, kThreads, 0, stream>>>(partials, blocks, 1.0, sum, /*add=*/true);
  return Launched();
}

cudaError_t DoubleToFloat(const double* in, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DoubleToFloatKernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, n);
  return Launched();
}

cudaError_t ClipToNorm(float* x, size_t n, const float* squared_norm, double max_norm,
                       ScalarType values, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (values == ScalarType::kBFloat16) {
    ClipToNormKernel<1><<<Blocks(n), kThreads, 0, stream>>>(x, n, squared_norm, max_norm);
  } else if (values == ScalarType::kFloat16) {
    ClipToNormKernel<2><<<Blocks(n), kThreads, 0, stream>>>(x, n, squared_norm, max_norm);
  } else {
    ClipToNormKernel<0><<<Blocks(n), kThreads, 0, stream>>>(x, n, squared_norm, max_norm);
  }
  return Launched();
}

cudaError_t Accumulate(TensorRef dst, ConstTensorRef src, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool typed = WithSharedStoredType({dst.type(), src.type()}, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    AccumulateKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<T*>(dst.data()),
                                                         static_cast<const T*>(src.data()), n);
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t Multiply(float* data, size_t n, float factor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  MultiplyKernel<<<Blocks(n), kThreads, 0, stream>>>(data, n, factor);
  return Launched();
}

cudaError_t Divide(float* data, size_t n, float divisor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DivideKernel<<<Blocks(n), kThreads, 0, stream>>>(data, n, divisor);
  return Launched();
}

cudaError_t ScaleAndCheckFinite(float* x, size_t n, float scale, int* found_inf,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaleAndCheckFiniteKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, scale, found_inf);
  return Launched();
}

cudaError_t SgdUpdate(const SgdScalars& params, bool first, float* param, const float* grad,
                      float* momentum_buf, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SgdKernel<<<Blocks(n), kThreads, 0, stream>>>(params, first, param, grad, momentum_buf, n);
  return Launched();
}

cudaError_t AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                        float* exp_avg_sq, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AdamWKernel<<<Blocks(n), kThreads, 0, stream>>>(s, param, grad, exp_avg, exp_avg_sq, n);
  return Launched();
}

cudaError_t AdamWUpdateSpans(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                             float* exp_avg_sq, const SpanTable& table, cudaStream_t stream) {
  if (table.total() == 0) return cudaSuccess;
  AdamWSpansKernel<<<Blocks(static_cast<size_t>(table.total())), kThreads, 0, stream>>>(
      s, s.WithoutDecay(), table, param, grad, exp_avg, exp_avg_sq);
  return Launched();
}

}  // namespace shardwise::cuda
