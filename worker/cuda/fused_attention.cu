#include <cstdint>
#include <type_traits>

#include "contracts/cuda_attention_rows.h"
#include "worker/compute/fused_attention_rows.h"
#include "worker/cuda/fused_attention.h"
#include "worker/cuda/kernel_support.cuh"
#include "worker/cuda/storage_elements.cuh"

namespace shardwise::cuda {
namespace {

using fused_attention::HeadLayout;
using fused_attention::kKey;
using fused_attention::kQuery;
using fused_attention::kValue;
using fused_attention::RowBlock;

// A row in registers: its size is known at compile time, so every loop over it unrolls
// and indexes it with constants.
template <int N>
struct RegisterRow {
  float values[N];
  __device__ static constexpr int64_t size() { return N; }
  __device__ float& operator[](int64_t d) { return values[d]; }
  __device__ const float& operator[](int64_t d) const { return values[d]; }
};

// A thread's own row in shared memory, spread across the block: element d of thread t at
// d * blockDim.x + t, so a warp reading element d reads 32 consecutive words (no bank
// conflicts). Only its thread reads it, so no barrier is needed.
template <int N>
struct SharedRow {
  float* first;  // element 0
  __device__ static constexpr int64_t size() { return N; }
  __device__ float& operator[](int64_t d) const { return first[d * blockDim.x]; }
};

// The k-th (0, 1) shared row of this thread.
template <int N>
__device__ SharedRow<N> OwnSharedRow(int k) {
  extern __shared__ float shared[];
  return {shared + k * N * blockDim.x + threadIdx.x};
}

// A row of values stored as S (FP32 or 16-bit), widened as it is read.
template <typename Row, typename S>
__device__ void Load(Row& row, const S* from) {
#pragma unroll
  for (int64_t d = 0; d < row.size(); ++d) row[d] = internal::LoadFloat(from, d);
}

// A row stored as G, each value rounded once (storage_elements.cuh).
template <typename Row, typename G>
__device__ void Store(const Row& row, G* to) {
#pragma unroll
  for (int64_t d = 0; d < row.size(); ++d) internal::StoreFloat(to, d, row[d]);
}

// The thread's head and row: its block is fused_attention::RowBlockAt(blockIdx.x), its
// row the block's first plus threadIdx.x; row >= seq: none.
struct ThreadRow {
  RowBlock block;
  HeadLayout at;
  int64_t row;
  __device__ explicit ThreadRow(const AttentionShape& shape)
      : block(fused_attention::RowBlockAt(shape, blockDim.x, blockIdx.x)),
        at{shape, block.b, block.h},
        row(block.first_row + threadIdx.x) {}
  __device__ bool valid() const { return row < at.shape.seq; }
  __device__ int64_t block_first_row() const { return block.first_row; }
};

// N: the head size the registers are shaped for; 0 runs the in-memory routines (FP32
// only: their outputs are their accumulators). S: the type q, k, v, out and dout are
// stored in; G: the gradients' (FP32 working space, or S).
template <int N, typename S>
__global__ void ForwardKernel(const S* qkv, AttentionShape shape, S* out, float* lse) {
  const ThreadRow t(shape);
  if (!t.valid()) return;
  if constexpr (N == 0) {
    fused_attention::ForwardInMemory(t.at, qkv, t.row, out, lse);
  } else {
    SharedRow<N> q = OwnSharedRow<N>(0);
    Load(q, qkv + t.at.qkv(t.row, kQuery));
    RegisterRow<N> acc;
    lse[t.at.stat(t.row)] = fused_attention::ForwardRow(t.at, qkv, t.row, q, acc);
    Store(acc, out + t.at.row(t.row));
  }
}

template <int N, typename S, typename G>
__global__ void QueryGradientKernel(const S* qkv, const S* out, const float* lse, const S* dout,
                                    AttentionShape shape, float* dots, G* dqkv) {
  const ThreadRow t(shape);
  if (!t.valid()) return;
  if constexpr (N == 0) {
    fused_attention::QueryGradientInMemory(t.at, qkv, out, lse, dout, t.row, dots, dqkv);
  } else {
    SharedRow<N> q = OwnSharedRow<N>(0), dout_row = OwnSharedRow<N>(1);
    Load(q, qkv + t.at.qkv(t.row, kQuery));
    Load(dout_row, dout + t.at.row(t.row));
    RegisterRow<N> dq;
    fused_attention::QueryGradientRow(t.at, qkv, out, lse, t.row, q, dout_row, dq, dots);
    Store(dq, dqkv + t.at.qkv(t.row, kQuery));
  }
}

// Every thread of the block starts its query loop at the block's first key, so a warp
// reads one query row at a time.
template <int N, typename S, typename G>
__global__ void KeyValueGradientKernel(const S* qkv, const S* dout, const float* lse,
                                       const float* dots, AttentionShape shape, G* dqkv) {
  const ThreadRow t(shape);
  if (!t.valid()) return;
  if constexpr (N == 0) {
    fused_attention::KeyValueGradientInMemory(t.at, qkv, dout, lse, dots, t.row,
                                              t.block_first_row(), dqkv);
  } else {
    SharedRow<N> k = OwnSharedRow<N>(0), v = OwnSharedRow<N>(1);
    Load(k, qkv + t.at.qkv(t.row, kKey));
    Load(v, qkv + t.at.qkv(t.row, kValue));
    RegisterRow<N> dk, dv;
    fused_attention::KeyValueGradientRow(t.at, qkv, dout, lse, dots, t.row, t.block_first_row(), k,
                                         v, dk, dv);
    Store(dk, dqkv + t.at.qkv(t.row, kKey));
    Store(dv, dqkv + t.at.qkv(t.row, kValue));
  }
}

// Rows per block: 32 KiB of shared memory for two rows per thread (within the 48 KiB a
// kernel gets without opting in), at least one warp.
int RowsPerBlock(int head_size) { return head_size >= 128 ? 32 : 64; }

struct Launch {
  dim3 grid, block;
  size_t shared_bytes;  // per shared row
};

// The most blocks a grid's x dimension holds.
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;

template <int N>
Launch LaunchFor(const AttentionShape& shape) {
  const int rows = RowsPerBlock(N);
  return {dim3(static_cast<unsigned>(fused_attention::RowBlockCount(shape, rows))), dim3(rows),
          N * rows * sizeof(float)};
}

// More row blocks than one grid holds (2^31 - 1: at 32 rows each, 2^36 query rows) is
// refused as CUDA refuses a grid too large, before a launch could silently wrap.
template <int N>
bool FitsOneGrid(const AttentionShape& shape) {
  return fused_attention::RowBlockCount(shape, RowsPerBlock(N)) <= kMaxGridX;
}

template <int N, typename S>
cudaError_t Forward(const S* qkv, const AttentionShape& shape, S* out, float* lse,
                    cudaStream_t stream) {
  if (!FitsOneGrid<N>(shape)) return cudaErrorInvalidConfiguration;
  const Launch l = LaunchFor<N>(shape);
  ForwardKernel<N, S><<<l.grid, l.block, l.shared_bytes, stream>>>(qkv, shape, out, lse);
  return internal::Launched();
}

template <int N, typename S, typename G>
cudaError_t Backward(const S* qkv, const S* out, const float* lse, const S* dout,
                     const AttentionShape& shape, float* dots, G* dqkv, cudaStream_t stream) {
  if (!FitsOneGrid<N>(shape)) return cudaErrorInvalidConfiguration;
  const Launch l = LaunchFor<N>(shape);
  QueryGradientKernel<N, S, G>
      <<<l.grid, l.block, 2 * l.shared_bytes, stream>>>(qkv, out, lse, dout, shape, dots, dqkv);
  if (const cudaError_t error = internal::Launched(); error != cudaSuccess) return error;
  KeyValueGradientKernel<N, S, G>
      <<<l.grid, l.block, 2 * l.shared_bytes, stream>>>(qkv, dout, lse, dots, shape, dqkv);
  return internal::Launched();
}

// The gradients into FP32 working space or in S, as `dqkv` is typed.
template <int N, typename S>
cudaError_t BackwardInto(const S* qkv, const S* out, const float* lse, const S* dout,
                         const AttentionShape& shape, float* dots, TensorRef dqkv,
                         ScalarType stored, cudaStream_t stream) {
  if (dqkv.type() == ScalarType::kFloat32) {
    return Backward<N>(qkv, out, lse, dout, shape, dots, static_cast<float*>(dqkv.data()), stream);
  }
  if constexpr (!std::is_same_v<S, float>) {
    if (dqkv.type() == stored) {
      return Backward<N>(qkv, out, lse, dout, shape, dots, static_cast<S*>(dqkv.data()), stream);
    }
  }
  return cudaErrorInvalidValue;
}

// Calls run(std::integral_constant<int, N>) with N the head size's specialisation (0:
// none, the in-memory routines): the sizes contracts/cuda_attention_rows.h names.
static_assert(CudaAttentionHasRegisterRows(32) && CudaAttentionHasRegisterRows(64) &&
              CudaAttentionHasRegisterRows(128) && !CudaAttentionHasRegisterRows(16));
template <typename Run>
cudaError_t ForHeadSize(int64_t head_dim, const Run& run) {
  switch (head_dim) {
    case 32:
      return run(std::integral_constant<int, 32>());
    case 64:
      return run(std::integral_constant<int, 64>());
    case 128:
      return run(std::integral_constant<int, 128>());
    default:
      return run(std::integral_constant<int, 0>());
  }
}

// Calls run(n, static_cast<S*>(nullptr)) for the head size's specialisation n and the
// stored type S of `type`; cudaErrorInvalidValue for a type no kernel stores, and for
// 16-bit storage at a head size without register rows.
template <typename Run>
cudaError_t ForHeadSizeAndType(int64_t head_dim, ScalarType type, const Run& run) {
  cudaError_t error = cudaErrorInvalidValue;
  internal::WithStoredType(type, [&](auto* stored) {
    using S = std::remove_pointer_t<decltype(stored)>;
    error = ForHeadSize(head_dim, [&](auto n) {
      if constexpr (decltype(n)::value == 0 && !std::is_same_v<S, float>) {
        return cudaErrorInvalidValue;
      } else {
        return run(n, stored);
      }
    });
  });
  return error;
}

}  // namespace

cudaError_t FusedAttentionForward(ConstTensorRef qkv, const AttentionShape& shape, TensorRef out,
                                  float* lse, cudaStream_t stream) {
  if (shape.batch * shape.heads * shape.seq == 0) return cudaSuccess;
  if (out.type() != qkv.type()) return cudaErrorInvalidValue;
  return ForHeadSizeAndType(shape.head_dim, qkv.type(), [&](auto n, auto* stored) {
    using S = std::remove_pointer_t<decltype(stored)>;
    return Forward<decltype(n)::value>(static_cast<const S*>(qkv.data()), shape,
                                       static_cast<S*>(out.data()), lse, stream);
  });
}

cudaError_t FusedAttentionBackward(ConstTensorRef qkv, ConstTensorRef out, const float* lse,
                                   ConstTensorRef dout, const AttentionShape& shape, float* dots,
                                   TensorRef dqkv, cudaStream_t stream) {
  if (shape.batch * shape.heads * shape.seq == 0) return cudaSuccess;
  if (out.type() != qkv.type() || dout.type() != qkv.type()) return cudaErrorInvalidValue;
  return ForHeadSizeAndType(shape.head_dim, qkv.type(), [&](auto n, auto* stored) {
    using S = std::remove_pointer_t<decltype(stored)>;
    return BackwardInto<decltype(n)::value>(
        static_cast<const S*>(qkv.data()), static_cast<const S*>(out.data()), lse,
        static_cast<const S*>(dout.data()), shape, dots, dqkv, qkv.type(), stream);
  });
}

}  // namespace shardwise::cuda
