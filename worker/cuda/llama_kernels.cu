#include <algorithm>
#include <type_traits>

#include "worker/compute/attention_shape.h"
#include "worker/compute/llama_rows.h"
#include "worker/cuda/kernel_support.cuh"
#include "worker/cuda/llama_kernels.h"
#include "worker/cuda/storage_elements.cuh"

namespace shardwise::cuda {
namespace {

// The launch shapes every kernel file uses.
using namespace internal;  // NOLINT(build/namespaces)

// ---- RMSNorm ----------------------------------------------------------------------------

// One warp per row (compute/norm_rows.h): float sums in a fixed order, 16-byte loads of
// FP32 rows; x, y, dy and dx in their storage type T, w in its W (FP32 or T:
// storage_elements.cuh). With a residual, x = x + residual first (AddResidualRow), then
// the norm of that sum.
template <typename T, typename W>
__global__ void RmsNormForwardKernel(T* x, const T* residual, const W* w, int64_t rows, int64_t dim,
                                     float eps, T* y, float* rstd) {
  const WarpPosition at = ThisWarp();
  const DeviceWarp reduce{at.lane};
  const norm_rows::Writer lane_groups{at.lane, norm_rows::kLanes};
  for (int64_t row = at.warp; row < rows; row += at.warps) {
    if (residual != nullptr) AddResidualRow(x + row * dim, residual + row * dim, dim, at.lane);
    const float row_rstd = norm_rows::RmsNormForwardRow(
        LoadRow(x + row * dim, dim), w, dim, eps, reduce, lane_groups, StoreRow(y + row * dim));
    if (at.lane == 0) rstd[row] = row_rstd;
  }
}

// kAdd: dx is added into (GradientRow), as the residual's gradient takes it.
template <bool kAdd, typename T, typename W>
__global__ void RmsNormInputGradKernel(const T* x, const W* w, const float* rstd, const T* dy,
                                       int64_t rows, int64_t dim, T* dx) {
  const WarpPosition at = ThisWarp();
  const DeviceWarp reduce{at.lane};
  const norm_rows::Writer lane_groups{at.lane, norm_rows::kLanes};
  for (int64_t row = at.warp; row < rows; row += at.warps) {
    norm_rows::RmsNormInputGradRow(LoadRow(x + row * dim, dim), LoadRow(dy + row * dim, dim), w,
                                   rstd[row], dim, reduce, lane_groups,
                                   GradientRow<kAdd>(dx + row * dim));
  }
}

// dw's chunk sums in the order llama_rows.h fixes, the CPU's: each thread sums one column
// over one chunk of rows from zero, row after row, into partials [chunks][dim]; block
// (column tile, chunk), the chunks strided by gridDim.y past its limit.
template <typename T>
__global__ void RmsNormWeightGradChunksKernel(const T* x, const float* rstd, const T* dy,
                                              int64_t rows, int64_t dim, float* partials) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= dim) return;
  const int64_t chunks = llama_rows::WeightGradChunks(rows);
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t begin = chunk * llama_rows::kWeightGradChunkRows;
    const int64_t end = begin + llama_rows::kWeightGradChunkRows < rows
                            ? begin + llama_rows::kWeightGradChunkRows
                            : rows;
    float sum = 0.0f;
    for (int64_t r = begin; r < end; ++r) {
      sum += llama_rows::RmsNormWeightGradTerm(LoadFloat(x, r * dim + j),
                                               LoadFloat(dy, r * dim + j), rstd[r]);
    }
    partials[chunk * dim + j] = sum;
  }
}

// dw[j] += its column's chunk sums, in chunk order.
__global__ void AddChunkSumsKernel(const float* partials, int64_t chunks, int64_t dim, float* dw) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < dim;
       j += stride) {
    float sum = dw[j];
    for (int64_t c = 0; c < chunks; ++c) sum += partials[c * dim + j];
    dw[j] = sum;
  }
}

// ---- rotary embeddings ------------------------------------------------------------------

// Thread k rotates pair i = k % half of head k / half (heads counted over all rows).
// x in its storage type T: the pair widened, rotated in float, stored rounded once.
template <typename T>
__global__ void RotaryKernel(T* x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                             int64_t heads, int64_t head_dim, bool inverse) {
  const int64_t half = head_dim / 2;
  const int64_t pairs = rows * heads * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < pairs;
       k += stride) {
    const int64_t i = k % half, head = k / half;
    const int64_t table = (head / heads % seq) * half + i;
    T* h = x + head * head_dim;
    float a = LoadFloat(h, i), b = LoadFloat(h, i + half);
    llama_rows::RotatePair(&a, &b, cos[table], sin[table], inverse);
    StoreFloat(h, i, a);
    StoreFloat(h, i + half, b);
  }
}

// ---- grouped-query packing --------------------------------------------------------------

// Thread e writes element e of qkv [rows, 3 * width]: from q, or from the K/V head its
// query head reads. A copy: q, k, v and qkv in one storage type T.
template <typename T>
__global__ void PackGroupedQkvKernel(const T* q, const T* k, const T* v, int64_t rows,
                                     int64_t heads, int64_t kv_heads, int64_t head_dim, T* qkv) {
  const int64_t width = heads * head_dim, kv_width = kv_heads * head_dim;
  const int64_t total = rows * 3 * width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t r = e / (3 * width), column = e % (3 * width);
    const int64_t part = column / width, c = column % width;
    if (part == 0) {
      qkv[e] = q[r * width + c];
      continue;
    }
    const int64_t h = c / head_dim, d = c % head_dim;
    const int64_t from = r * kv_width + KvHeadOf(h, heads, kv_heads) * head_dim + d;
    qkv[e] = part == 1 ? k[from] : v[from];
  }
}

// dqkv in its type G (FP32 working space, or the storage type), dq in T: widened and
// rounded once as stored.
template <typename G, typename T>
__global__ void UnpackQueryGradKernel(const G* dqkv, int64_t rows, int64_t width, T* dq) {
  const int64_t total = rows * width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    StoreFloat(dq, e, LoadFloat(dqkv, e / width * 3 * width + e % width));
  }
}

// Thread e sums element e of dk and dv [rows, kv_width] over the query heads that read its
// K/V head, in head order from zero, in float: the CPU's additions, so the same bits, each
// sum rounded once as stored.
template <typename G, typename T>
__global__ void UnpackKeyValueGradKernel(const G* dqkv, int64_t rows, int64_t heads,
                                         int64_t kv_heads, int64_t head_dim, T* dk, T* dv) {
  const int64_t width = heads * head_dim, kv_width = kv_heads * head_dim;
  const int64_t total = rows * kv_width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t r = e / kv_width, c = e % kv_width;
    const int64_t kv_head = c / head_dim, d = c % head_dim;
    const G* in = dqkv + r * 3 * width;
    float k_sum = 0.0f, v_sum = 0.0f;
    for (int64_t h = 0; h < heads; ++h) {
      if (KvHeadOf(h, heads, kv_heads) != kv_head) continue;
      k_sum += LoadFloat(in, width + h * head_dim + d);
      v_sum += LoadFloat(in, 2 * width + h * head_dim + d);
    }
    StoreFloat(dk, e, k_sum);
    StoreFloat(dv, e, v_sum);
  }
}

// ---- elementwise ------------------------------------------------------------------------

template <typename T>
__global__ void MultiplyElementwiseKernel(const T* a, const T* b, size_t n, T* out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    StoreFloat(out, i, LoadFloat(a, i) * LoadFloat(b, i));
  }
}

}  // namespace

cudaError_t RmsNormForward(ConstTensorRef x, ConstTensorRef w, int64_t rows, int64_t dim, float eps,
                           TensorRef y, float* rstd, cudaStream_t stream) {
  // The kernel writes x only with a residual.
  return AddRmsNormForward(TensorRef(const_cast<void*>(x.data()), x.type()), nullptr, w, rows, dim,
                           eps, y, rstd, stream);
}

cudaError_t AddRmsNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w, int64_t rows,
                              int64_t dim, float eps, TensorRef y, float* rstd,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const bool typed =
      WithRowAndWeightTypes({x, y}, residual, {w}, [&](auto* type, auto* weight_type) {
        using T = std::remove_pointer_t<decltype(type)>;
        using W = std::remove_pointer_t<decltype(weight_type)>;
        RmsNormForwardKernel<<<WarpBlocks(rows), kThreads, 0, stream>>>(
            static_cast<T*>(x.data()), static_cast<const T*>(residual.data()),
            static_cast<const W*>(w.data()), rows, dim, eps, static_cast<T*>(y.data()), rstd);
      });
  return typed ? Launched() : cudaErrorInvalidValue;
}

size_t RmsNormBackwardPartials(int64_t rows, int64_t dim) {
  return static_cast<size_t>(llama_rows::WeightGradChunks(rows) * dim);
}

cudaError_t RmsNormBackward(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                            ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dx,
                            bool add_to_dx, float* dw, float* partials, cudaStream_t stream) {
  if (rows == 0 || dim == 0) return cudaSuccess;
  if (dw != nullptr && partials == nullptr) return cudaErrorInvalidValue;
  const int64_t chunks = llama_rows::WeightGradChunks(rows);
  constexpr int64_t kMaxGridY = 65535;
  const dim3 grid(static_cast<unsigned>((dim + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min(chunks, kMaxGridY)));
  const bool typed = WithNormGradValues(x, dy, w, dx, [&](const auto& v) {
    WithAddToDx(add_to_dx, [&](auto add) {
      RmsNormInputGradKernel<decltype(add)::value>
          <<<WarpBlocks(rows), kThreads, 0, stream>>>(v.x, v.w, rstd, v.dy, rows, dim, v.dx);
    });
    if (dw == nullptr) return;
    RmsNormWeightGradChunksKernel<<<grid, kThreads, 0, stream>>>(v.x, rstd, v.dy, rows, dim,
                                                                 partials);
    AddChunkSumsKernel<<<Blocks(dim), kThreads, 0, stream>>>(partials, chunks, dim, dw);
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t Rotary(TensorRef x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                   int64_t heads, int64_t head_dim, bool inverse, cudaStream_t stream) {
  const int64_t pairs = rows * heads * (head_dim / 2);
  if (pairs == 0) return cudaSuccess;
  const bool typed = WithStoredType(x.type(), [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    RotaryKernel<<<Blocks(pairs), kThreads, 0, stream>>>(static_cast<T*>(x.data()), cos, sin, rows,
                                                         seq, heads, head_dim, inverse);
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t PackGroupedQkv(ConstTensorRef q, ConstTensorRef k, ConstTensorRef v, int64_t rows,
                           int64_t heads, int64_t kv_heads, int64_t head_dim, TensorRef qkv,
                           cudaStream_t stream) {
  const int64_t total = rows * 3 * heads * head_dim;
  if (total == 0) return cudaSuccess;
  const bool typed =
      WithSharedStoredType({q.type(), k.type(), v.type(), qkv.type()}, [&](auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        PackGroupedQkvKernel<<<Blocks(total), kThreads, 0, stream>>>(
            static_cast<const T*>(q.data()), static_cast<const T*>(k.data()),
            static_cast<const T*>(v.data()), rows, heads, kv_heads, head_dim,
            static_cast<T*>(qkv.data()));
      });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t UnpackGroupedQkvGrad(ConstTensorRef dqkv, int64_t rows, int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, TensorRef dq, TensorRef dk, TensorRef dv,
                                 cudaStream_t stream) {
  const int64_t width = heads * head_dim;
  if (rows * width == 0) return cudaSuccess;
  if (dk.type() != dq.type() || dv.type() != dq.type()) return cudaErrorInvalidValue;
  const int64_t kv_total = rows * kv_heads * head_dim;
  cudaError_t error = cudaSuccess;
  const bool typed = WithStoredTypes(dqkv.type(), dq.type(), [&](auto* grad_type, auto* type) {
    using G = std::remove_pointer_t<decltype(grad_type)>;
    using T = std::remove_pointer_t<decltype(type)>;
    const G* in = static_cast<const G*>(dqkv.data());
    UnpackQueryGradKernel<<<Blocks(rows * width), kThreads, 0, stream>>>(
        in, rows, width, static_cast<T*>(dq.data()));
    error = Launched();
    if (error != cudaSuccess) return;
    UnpackKeyValueGradKernel<<<Blocks(kv_total), kThreads, 0, stream>>>(
        in, rows, heads, kv_heads, head_dim, static_cast<T*>(dk.data()),
        static_cast<T*>(dv.data()));
    error = Launched();
  });
  return typed ? error : cudaErrorInvalidValue;
}

cudaError_t MultiplyElementwise(ConstTensorRef a, ConstTensorRef b, size_t n, TensorRef out,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool typed = WithSharedStoredType({a.type(), b.type(), out.type()}, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    MultiplyElementwiseKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(a.data()),
                                                                  static_cast<const T*>(b.data()),
                                                                  n, static_cast<T*>(out.data()));
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

}  // namespace shardwise::cuda
