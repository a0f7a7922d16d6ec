#include "worker/cuda/cudnn_test_support.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace shardwise::cuda::testing {

CudnnFacts LoadedCudnnFacts() {
  cudaDeviceProp props{};
  const int capability =
      cudaGetDeviceProperties(&props, 0) == cudaSuccess ? props.major * 10 + props.minor : 0;
  return {static_cast<int64_t>(cudnnGetVersion()), capability};
}

std::string CudnnRefusal(const AttentionLayout& layout, GraphType io,
                         AttentionBackwardKind backward) {
  const absl::Status refused = CheckCudnnAttention(LoadedCudnnFacts(), layout, io, backward);
  return refused.ok() ? "" : std::string(refused.message());
}

}  // namespace shardwise::cuda::testing
