#ifndef SHARDWISE_WORKER_CUDA_KERNEL_SUPPORT_CUH_
#define SHARDWISE_WORKER_CUDA_KERNEL_SUPPORT_CUH_

// What the kernel files share (CUDA source only): launch shapes and the block-wide
// reductions. The reductions sum in a fixed tree, never with atomics, so a kernel built on
// them gives the same bits on every run.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

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

}  // namespace shardwise::cuda::internal

#endif  // SHARDWISE_WORKER_CUDA_KERNEL_SUPPORT_CUH_
