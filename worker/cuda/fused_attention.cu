#include <cstdint>
#include <type_traits>

#include "worker/compute/fused_attention_rows.h"
#include "worker/cuda/fused_attention.h"
#include "worker/cuda/kernel_support.cuh"

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

template <typename Row>
__device__ void Load(Row& row, const float* from) {
#pragma unroll
  for (int64_t d = 0; d < row.size(); ++d) row[d] = from[d];
}

template <typename Row>
__device__ void Store(const Row& row, float* to) {
#pragma unroll
  for (int64_t d = 0; d < row.size(); ++d) to[d] = row[d];
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

// N: the head size the registers are shaped for; 0 runs the in-memory routines.
template <int N>
__global__ void ForwardKernel(const float* qkv, AttentionShape shape, float* out, float* lse) {
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

template <int N>
__global__ void QueryGradientKernel(const float* qkv, const float* out, const float* lse,
                                    const float* dout, AttentionShape shape, float* dots,
                                    float* dqkv) {
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
template <int N>
__global__ void KeyValueGradientKernel(const float* qkv, const float* dout, const float* lse,
                                       const float* dots, AttentionShape shape, float* dqkv) {
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

template <int N>
cudaError_t Forward(const float* qkv, const AttentionShape& shape, float* out, float* lse,
                    cudaStream_t stream) {
  if (!FitsOneGrid<N>(shape)) return cudaErrorInvalidConfiguration;
  const Launch l = LaunchFor<N>(shape);
  ForwardKernel<N><<<l.grid, l.block, l.shared_bytes, stream>>>(qkv, shape, out, lse);
  return internal::Launched();
}

template <int N>
cudaError_t Backward(const float* qkv, const float* out, const float* lse, const float* dout,
                     const AttentionShape& shape, float* dots, float* dqkv, cudaStream_t stream) {
  if (!FitsOneGrid<N>(shape)) return cudaErrorInvalidConfiguration;
  const Launch l = LaunchFor<N>(shape);
  QueryGradientKernel<N>
      <<<l.grid, l.block, 2 * l.shared_bytes, stream>>>(qkv, out, lse, dout, shape, dots, dqkv);
  if (const cudaError_t error = internal::Launched(); error != cudaSuccess) return error;
  KeyValueGradientKernel<N>
      <<<l.grid, l.block, 2 * l.shared_bytes, stream>>>(qkv, dout, lse, dots, shape, dqkv);
  return internal::Launched();
}

// Calls run(std::integral_constant<int, N>) with N the head size's specialisation (0:
// none, the in-memory routines).
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

}  // namespace

cudaError_t FusedAttentionForward(const float* qkv, const AttentionShape& shape, float* out,
                                  float* lse, cudaStream_t stream) {
  if (shape.batch * shape.heads * shape.seq == 0) return cudaSuccess;
  return ForHeadSize(shape.head_dim, [&](auto n) {
    return Forward<decltype(n)::value>(qkv, shape, out, lse, stream);
  });
}

cudaError_t FusedAttentionBackward(const float* qkv, const float* out, const float* lse,
                                   const float* dout, const AttentionShape& shape, float* dots,
                                   float* dqkv, cudaStream_t stream) {
  if (shape.batch * shape.heads * shape.seq == 0) return cudaSuccess;
  return ForHeadSize(shape.head_dim, [&](auto n) {
    return Backward<decltype(n)::value>(qkv, out, lse, dout, shape, dots, dqkv, stream);
  });
}

}  // namespace shardwise::cuda
