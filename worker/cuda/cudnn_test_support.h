#ifndef SHARDWISE_WORKER_CUDA_CUDNN_TEST_SUPPORT_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_TEST_SUPPORT_H_

// For the GPU tests of cuDNN's fused attention: whether the cuDNN this process loaded (a
// GPU host's, which may be older than the toolkit's the code was built with) and GPU 0
// can run a case, by the rules the worker itself applies (cudnn_requirements.h), so a
// case it cannot run is reported skipped with the reason instead of failing.

#include <string>

#include "worker/cuda/attention_graph.h"
#include "worker/cuda/cudnn_requirements.h"

namespace shardwise::cuda::testing {

// CheckCudnnAttention's refusal for `layout` in `io` on GPU 0 (LoadedCudnnFacts), or
// empty where cuDNN can run it.
std::string CudnnRefusal(const AttentionLayout& layout, GraphType io,
                         AttentionBackwardKind backward = AttentionBackwardKind::kDeterministic);

}  // namespace shardwise::cuda::testing

// In a test body: skips the test, naming why, where cuDNN cannot run the case.
#define SKIP_WHERE_CUDNN_REFUSES(...)                                                             \
  do {                                                                                            \
    const std::string shardwise_refusal_ = ::shardwise::cuda::testing::CudnnRefusal(__VA_ARGS__); \
    if (!shardwise_refusal_.empty()) GTEST_SKIP() << shardwise_refusal_;                          \
  } while (false)

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_TEST_SUPPORT_H_
