#include "worker/cuda/gpu_test_support.h"

namespace shardwise::cuda::testing {

std::string NoGpuReason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return std::string("no CUDA GPU here: ") + cudaGetErrorString(error);
  }
  if (count == 0) return "no CUDA GPU here: the driver reports 0 devices";
  return "";
}

}  // namespace shardwise::cuda::testing
