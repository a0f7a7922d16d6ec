#include <algorithm>
#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "worker/cuda/kernel_support.cuh"
#include "worker/cuda/storage_elements.cuh"
#include "worker/cuda/transformer_kernels.h"

namespace shardwise::cuda {
namespace {

// The launch shapes and block reductions every kernel file uses.
using namespace internal;  // NOLINT(build/namespaces)

// Row-per-block kernels loop over rows past the grid's size.
constexpr int64_t kMaxRowBlocks = 1 << 20;
// LayerNorm's parameter gradients: the rows are summed in at most this many chunks.
constexpr int64_t kMaxRowChunks = 256;
// Each part of the embedding backward's scratch starts on this boundary.
constexpr size_t kScratchAlignment = 256;

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(std::min(rows, kMaxRowBlocks)); }

size_t AlignUp(size_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

// ---- embedding --------------------------------------------------------------------------

template <typename Table, typename Out>
__global__ void EmbeddingForwardKernel(const Table* table, const int64_t* ids, int64_t n,
                                       int64_t dim, Out* out) {
  const size_t total = static_cast<size_t>(n) * dim;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += stride) {
    const size_t i = k / dim, j = k % dim;
    StoreFloat(out, k, LoadFloat(table, ids[i] * dim + j));
  }
}

__global__ void IotaKernel(int* values, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    values[i] = static_cast<int>(i);
  }
}

// Block s owns the run of equal ids starting at sorted position s (blocks inside a run
// return at once); its threads take the columns and add the run's rows in order. dout in
// its storage type T, widened as it is read.
template <typename T>
__global__ void EmbeddingRunSumKernel(const int64_t* sorted_ids, const int* positions,
                                      const T* dout, int64_t n, int64_t dim, float* dtable) {
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const int64_t id = sorted_ids[s];
    if (s > 0 && sorted_ids[s - 1] == id) continue;
    float* row = dtable + id * dim;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      float sum = row[j];
      for (int64_t t = s; t < n && sorted_ids[t] == id; ++t) {
        sum += LoadFloat(dout, static_cast<int64_t>(positions[t]) * dim + j);
      }
      row[j] = sum;
    }
  }
}

// The scratch's parts: the sorted ids, the positions before and after sorting, CUB's own.
struct EmbeddingScratch {
  int64_t* sorted_ids;
  int* positions;
  int* sorted_positions;
  void* sort_storage;
  size_t sort_bytes;
};

cudaError_t SortBytes(int64_t n, size_t* bytes) {
  return cub::DeviceRadixSort::SortPairs(
      nullptr, *bytes, static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
      static_cast<const int*>(nullptr), static_cast<int*>(nullptr), static_cast<int>(n));
}

EmbeddingScratch CarveScratch(void* scratch, int64_t n, size_t sort_bytes) {
  char* at = static_cast<char*>(scratch);
  EmbeddingScratch parts;
  parts.sorted_ids = reinterpret_cast<int64_t*>(at);
  at += AlignUp(n * sizeof(int64_t));
  parts.positions = reinterpret_cast<int*>(at);
  at += AlignUp(n * sizeof(int));
  parts.sorted_positions = reinterpret_cast<int*>(at);
  at += AlignUp(n * sizeof(int));
  parts.sort_storage = at;
  parts.sort_bytes = sort_bytes;
  return parts;
}

// The scratch's size: CarveScratch's parts, CUB's last.
size_t ScratchBytes(int64_t n, size_t sort_bytes) {
  return AlignUp(n * sizeof(int64_t)) + 2 * AlignUp(n * sizeof(int)) + sort_bytes;
}

// ---- layer norm -------------------------------------------------------------------------

// One warp per row (compute/norm_rows.h): float sums in a fixed order, 16-byte loads of
// FP32 rows; x, y, dy and dx in their storage type T, w and b in theirs W (FP32 or T:
// storage_elements.cuh). With a residual, x = x + residual first (AddResidualRow), then
// the norm of that sum.
template <typename T, typename W>
__global__ void LayerNormForwardKernel(T* x, const T* residual, const W* w, const W* b,
                                       int64_t rows, int64_t dim, float eps, T* y, float* mean,
                                       float* rstd) {
  const WarpPosition at = ThisWarp();
  const DeviceWarp reduce{at.lane};
  const norm_rows::Writer lane_groups{at.lane, norm_rows::kLanes};
  for (int64_t row = at.warp; row < rows; row += at.warps) {
    if (residual != nullptr) AddResidualRow(x + row * dim, residual + row * dim, dim, at.lane);
    const norm_rows::Moments moments = norm_rows::LayerNormForwardRow(
        LoadRow(x + row * dim, dim), w, b, dim, eps, reduce, lane_groups, StoreRow(y + row * dim));
    if (at.lane == 0) {
      mean[row] = moments.mean;
      rstd[row] = moments.rstd;
    }
  }
}

// kAdd: dx is added into (GradientRow), as the residual's gradient takes it.
template <bool kAdd, typename T, typename W>
__global__ void LayerNormInputGradKernel(const T* x, const W* w, const float* mean,
                                         const float* rstd, const T* dy, int64_t rows, int64_t dim,
                                         T* dx) {
  const WarpPosition at = ThisWarp();
  const DeviceWarp reduce{at.lane};
  const norm_rows::Writer lane_groups{at.lane, norm_rows::kLanes};
  for (int64_t row = at.warp; row < rows; row += at.warps) {
    norm_rows::LayerNormInputGradRow(LoadRow(x + row * dim, dim), LoadRow(dy + row * dim, dim), w,
                                     {mean[row], rstd[row]}, dim, reduce, lane_groups,
                                     GradientRow<kAdd>(dx + row * dim));
  }
}

// Block (column tile, chunk): each thread sums one column over the chunk's rows;
// partials [2][chunks][dim]: the weight's sums, then the bias's.
template <typename T>
__global__ void LayerNormParamPartialsKernel(const T* x, const float* mean, const float* rstd,
                                             const T* dy, int64_t rows, int64_t dim,
                                             int64_t rows_per_chunk, double* partials) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= dim) return;
  const int64_t chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t end = min(rows, (chunk + 1) * rows_per_chunk);
  double w_sum = 0, b_sum = 0;
  for (int64_t row = chunk * rows_per_chunk; row < end; ++row) {
    const float grad = LoadFloat(dy, row * dim + j);
    const double xhat = (LoadFloat(x, row * dim + j) - static_cast<double>(mean[row])) * rstd[row];
    w_sum += grad * xhat;
    b_sum += grad;
  }
  partials[chunk * dim + j] = w_sum;
  partials[(chunks + chunk) * dim + j] = b_sum;
}

__global__ void LayerNormParamGradKernel(const double* partials, int64_t chunks, int64_t dim,
                                         float* dw, float* db) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < dim;
       j += stride) {
    double w_sum = 0, b_sum = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      w_sum += partials[c * dim + j];
      b_sum += partials[(chunks + c) * dim + j];
    }
    if (dw != nullptr) dw[j] += static_cast<float>(w_sum);
    if (db != nullptr) db[j] += static_cast<float>(b_sum);
  }
}

int64_t RowChunks(int64_t rows) { return std::max<int64_t>(1, std::min(rows, kMaxRowChunks)); }

// ---- causal softmax ---------------------------------------------------------------------

// As the CPU: s * scale, exp(s - max), times 1 / sum (the sum in double here).
__global__ void CausalSoftmaxForwardKernel(float* scores, int64_t rows, int64_t seq, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % seq;
    float* row = scores + r * seq;
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
      max = fmaxf(max, __fmul_rn(row[j], scale));
    }
    max = BlockMax(max);
    double sum = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
      const float e = expf(__fsub_rn(__fmul_rn(row[j], scale), max));
      row[j] = e;
      sum += e;
    }
    const float inverse = 1.0f / static_cast<float>(BlockSum(sum));
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
      row[j] = j <= i ? __fmul_rn(row[j], inverse) : 0.0f;
    }
  }
}

__global__ void CausalSoftmaxBackwardKernel(const float* probs, float* grad, int64_t rows,
                                            int64_t seq, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % seq;
    const float* p = probs + r * seq;
    float* d = grad + r * seq;
    double dot = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
      dot += static_cast<double>(d[j]) * p[j];
    }
    const float row_dot = static_cast<float>(BlockSum(dot));
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
      d[j] = j <= i ? __fmul_rn(__fmul_rn(p[j], __fsub_rn(d[j], row_dot)), scale) : 0.0f;
    }
  }
}

}  // namespace

cudaError_t EmbeddingForward(ConstTensorRef table, const int64_t* ids, int64_t n, int64_t dim,
                             TensorRef out, cudaStream_t stream) {
  if (n * dim == 0) return cudaSuccess;
  const bool typed =
      WithStoredTypes(table.type(), out.type(), [&](auto* table_type, auto* out_type) {
        using Table = std::remove_pointer_t<decltype(table_type)>;
        using Out = std::remove_pointer_t<decltype(out_type)>;
        EmbeddingForwardKernel<<<Blocks(n * dim), kThreads, 0, stream>>>(
            static_cast<const Table*>(table.data()), ids, n, dim, static_cast<Out*>(out.data()));
      });
  return typed ? Launched() : cudaErrorInvalidValue;
}

size_t EmbeddingBackwardScratchBytes(int64_t n) {
  if (n > INT_MAX) return 0;  // CUB sorts int counts; EmbeddingBackward refuses such n
  size_t sort_bytes = 0;
  if (SortBytes(n, &sort_bytes) != cudaSuccess) return 0;
  return ScratchBytes(n, sort_bytes);
}

cudaError_t EmbeddingBackward(const int64_t* ids, ConstTensorRef dout, int64_t n, int64_t dim,
                              float* dtable, void* scratch, size_t scratch_bytes,
                              cudaStream_t stream) {
  if (n * dim == 0) return cudaSuccess;
  if (n > INT_MAX) return cudaErrorInvalidValue;
  if (!WithStoredType(dout.type(), [](auto*) {})) return cudaErrorInvalidValue;
  size_t sort_bytes = 0;
  cudaError_t error = SortBytes(n, &sort_bytes);
  if (error != cudaSuccess) return error;
  if (scratch_bytes < ScratchBytes(n, sort_bytes)) return cudaErrorInvalidValue;
  EmbeddingScratch parts = CarveScratch(scratch, n, sort_bytes);
  IotaKernel<<<Blocks(n), kThreads, 0, stream>>>(parts.positions, n);
  if ((error = Launched()) != cudaSuccess) return error;
  // Radix sort is stable: equal ids keep their positions in ascending order.
  error =
      cub::DeviceRadixSort::SortPairs(parts.sort_storage, parts.sort_bytes, ids, parts.sorted_ids,
                                      parts.positions, parts.sorted_positions, static_cast<int>(n),
                                      0, static_cast<int>(sizeof(int64_t) * 8), stream);
  if (error != cudaSuccess) return error;
  (void)WithStoredType(dout.type(), [&](auto* type) {  // a stored type: checked above
    using T = std::remove_pointer_t<decltype(type)>;
    EmbeddingRunSumKernel<<<RowBlocks(n), kThreads, 0, stream>>>(
        parts.sorted_ids, parts.sorted_positions, static_cast<const T*>(dout.data()), n, dim,
        dtable);
  });
  return Launched();
}

cudaError_t LayerNormForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t rows,
                             int64_t dim, float eps, TensorRef y, float* mean, float* rstd,
                             cudaStream_t stream) {
  // The kernel writes x only with a residual.
  return AddLayerNormForward(TensorRef(const_cast<void*>(x.data()), x.type()), nullptr, w, b, rows,
                             dim, eps, y, mean, rstd, stream);
}

cudaError_t AddLayerNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w,
                                ConstTensorRef b, int64_t rows, int64_t dim, float eps, TensorRef y,
                                float* mean, float* rstd, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const bool typed =
      WithRowAndWeightTypes({x, y}, residual, {w, b}, [&](auto* type, auto* weight_type) {
        using T = std::remove_pointer_t<decltype(type)>;
        using W = std::remove_pointer_t<decltype(weight_type)>;
        LayerNormForwardKernel<<<WarpBlocks(rows), kThreads, 0, stream>>>(
            static_cast<T*>(x.data()), static_cast<const T*>(residual.data()),
            static_cast<const W*>(w.data()), static_cast<const W*>(b.data()), rows, dim, eps,
            static_cast<T*>(y.data()), mean, rstd);
      });
  return typed ? Launched() : cudaErrorInvalidValue;
}

size_t LayerNormBackwardPartials(int64_t rows, int64_t dim) {
  return static_cast<size_t>(2 * RowChunks(rows) * dim);
}

cudaError_t LayerNormBackward(ConstTensorRef x, ConstTensorRef w, const float* mean,
                              const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                              TensorRef dx, bool add_to_dx, float* dw, float* db, double* partials,
                              cudaStream_t stream) {
  if (rows == 0 || dim == 0) return cudaSuccess;
  const int64_t chunks = RowChunks(rows);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((dim + kThreads - 1) / kThreads),
                  static_cast<unsigned>(chunks));
  const bool typed = WithNormGradValues(x, dy, w, dx, [&](const auto& v) {
    WithAddToDx(add_to_dx, [&](auto add) {
      LayerNormInputGradKernel<decltype(add)::value>
          <<<WarpBlocks(rows), kThreads, 0, stream>>>(v.x, v.w, mean, rstd, v.dy, rows, dim, v.dx);
    });
    if (dw == nullptr && db == nullptr) return;
    LayerNormParamPartialsKernel<<<grid, kThreads, 0, stream>>>(v.x, mean, rstd, v.dy, rows, dim,
                                                                rows_per_chunk, partials);
    LayerNormParamGradKernel<<<Blocks(dim), kThreads, 0, stream>>>(partials, chunks, dim, dw, db);
  });
  return typed ? Launched() : cudaErrorInvalidValue;
}

cudaError_t CausalSoftmaxForward(float* scores, int64_t rows, int64_t seq, float scale,
                                 cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CausalSoftmaxForwardKernel<<<RowBlocks(rows), kThreads, 0, stream>>>(scores, rows, seq, scale);
  return Launched();
}

cudaError_t CausalSoftmaxBackward(const float* probs, float* grad, int64_t rows, int64_t seq,
                                  float scale, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CausalSoftmaxBackwardKernel<<<RowBlocks(rows), kThreads, 0, stream>>>(probs, grad, rows, seq,
                                                                        scale);
  return Launched();
}

}  // namespace shardwise::cuda
