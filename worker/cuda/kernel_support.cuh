#ifndef SHARDWISE_WORKER_CUDA_KERNEL_SUPPORT_CUH_
#define SHARDWISE_WORKER_CUDA_KERNEL_SUPPORT_CUH_

// What the kernel files share (CUDA source only): launch shapes and the block-wide
// reductions. The reductions sum in a fixed tree, never with atomics, so a kernel built on
// them gives the same bits on every run.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "worker/compute/norm_rows.h"

namespace shardwise::cuda::internal {

inline constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; grid-stride loops do the rest.
inline constexpr size_t kMaxBlocks = 4096;

inline unsigned Blocks(size_t work_items) {
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min(kMaxBlocks, (work_items + kThreads - 1) / kThreads)));
}

inline cudaError_t Launched() { return cudaGetLastError(); }

// Sums the block's values (blockDim.x == kThreads) in a fixed tree; every thread gets the
// total.
__device__ inline double BlockSum(double value) {
  __shared__ double shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shared[threadIdx.x] += shared[threadIdx.x + width];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

__device__ inline float BlockMax(float value) {
  __shared__ float shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + width]);
    }
    __syncthreads();
  }
  const float max = shared[0];
  __syncthreads();
  return max;
}

// ---- one row per warp (compute/norm_rows.h) ----------------------------------------------

inline constexpr int kWarpsPerBlock = kThreads / norm_rows::kLanes;
// Row-per-warp kernels loop over rows past the grid's size.
inline constexpr int64_t kMaxWarpBlocks = 1 << 16;

inline unsigned WarpBlocks(int64_t rows) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min(kMaxWarpBlocks, (rows + kWarpsPerBlock - 1) / kWarpsPerBlock)));
}

// The warp's butterfly (norm_rows::ButterflySum): every lane gets the lanes' total.
__device__ inline float WarpSum(float value) {
  for (int offset = norm_rows::kLanes / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// norm_rows' reduce for one lane of a warp.
struct DeviceWarp {
  int lane;
  template <typename Terms>
  __device__ float operator()(int64_t dim, const Terms& terms) const {
    return WarpSum(norm_rows::LaneSum(lane, dim, terms));
  }
};

// A row's groups, each one 16-byte load where the row is 16-byte aligned and holds the
// whole group, else value by value (the same values either way).
struct DeviceRow {
  const float* row;
  int64_t dim;
  bool aligned;
  __device__ DeviceRow(const float* row, int64_t dim)
      : row(row), dim(dim), aligned(reinterpret_cast<uintptr_t>(row) % 16 == 0) {}
  __device__ norm_rows::Quad operator()(int64_t g) const {
    if (aligned && (g + 1) * norm_rows::kVector <= dim) {
      const float4 f = reinterpret_cast<const float4*>(row)[g];
      return {{f.x, f.y, f.z, f.w}};
    }
    return norm_rows::ScalarQuad(row, g, dim);
  }
};

// The warp of this thread, the warps of the grid, and the thread's lane.
struct WarpPosition {
  int64_t warp, warps;
  int lane;
};
__device__ inline WarpPosition ThisWarp() {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  return {thread / norm_rows::kLanes,
          static_cast<int64_t>(gridDim.x) * blockDim.x / norm_rows::kLanes,
          static_cast<int>(threadIdx.x % norm_rows::kLanes)};
}

}  // namespace shardwise::cuda::internal

#endif  // SHARDWISE_WORKER_CUDA_KERNEL_SUPPORT_CUH_
