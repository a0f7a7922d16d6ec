#include "worker/cuda/cudnn_test_support.h"

#include "worker/cuda/cudnn_attention.h"

namespace shardwise::cuda::testing {

std::string CudnnRefusal(const AttentionLayout& layout, GraphType io,
                         AttentionBackwardKind backward) {
  const absl::StatusOr<CudnnFacts> facts = LoadedCudnnFacts(0);
  if (!facts.ok()) return std::string(facts.status().message());
  const absl::Status refused = CheckCudnnAttention(*facts, layout, io, backward);
  return refused.ok() ? "" : std::string(refused.message());
}

}  // namespace shardwise::cuda::testing
