#include "worker/cuda/cudnn_attention.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/cudnn_backend.h"

namespace shardwise::cuda {

absl::StatusOr<CudnnFacts> LoadedCudnnFacts(int gpu) {
  cudaDeviceProp props;
  RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&props, gpu));
  return CudnnFacts{static_cast<int64_t>(cudnnGetVersion()), props.major * 10 + props.minor};
}

absl::StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Create(
    const CudnnFacts& facts, cudaStream_t stream, Allocator* allocator,
    AttentionBackwardKind backward) {
  RETURN_IF_ERROR(CheckCudnnVersion(facts.version));
  RETURN_IF_ERROR(CheckCudnnBackwardKind(facts, backward));
  cudnnHandle_t handle = nullptr;
  RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&handle), "cudnnCreate"));
  std::unique_ptr<CudnnAttention> attention(
      new CudnnAttention(handle, allocator, facts.version, backward));
  RETURN_IF_ERROR(CudnnStatus(cudnnSetStream(handle, stream), "cudnnSetStream"));
  return attention;
}

CudnnAttention::CudnnAttention(cudnnHandle_t handle, Allocator* allocator, int64_t version,
                               AttentionBackwardKind backward)
    : handle_(handle), allocator_(allocator), version_(version), backward_(backward) {}

CudnnAttention::~CudnnAttention() {
  plans_.clear();
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

absl::StatusOr<CudnnAttentionPlan*> CudnnAttention::PlanFor(const AttentionLayout& layout,
                                                            GraphType io, bool backward) {
  auto& plan = plans_[std::make_tuple(layout, io, backward)];
  if (plan == nullptr) {
    AttentionGraph graph = backward ? AttentionBackwardGraph(layout, io, backward_)
                                    : AttentionForwardGraph(layout, io);
    absl::StatusOr<std::unique_ptr<CudnnAttentionPlan>> built =
        CudnnAttentionPlan::Build(std::move(graph), PlanTarget{handle_, nullptr});
    if (!built.ok()) {
      plans_.erase(std::make_tuple(layout, io, backward));
      return built.status();
    }
    plan = std::move(*built);
    // What each call borrows from the caching allocator: the memory estimate's budget for
    // it is checked against this on the GPU.
    LogInfo(LogContext(),
            absl::StrCat("cuDNN attention plan built (",
                         backward ? AttentionBackwardKindName(backward_) : "forward",
                         backward ? " backward, " : ", ", layout.batch, " x ", layout.seq, ", ",
                         layout.heads, " heads on ", layout.kv_heads, " K/V heads of ",
                         layout.head_dim, ", ", GraphTypeName(io), "): engine ", plan->engine(),
                         ", scratch ", plan->scratch_bytes(), " bytes"));
  }
  return plan.get();
}

absl::Status CudnnAttention::Prepare(const AttentionLayout& layout, GraphType io) {
  RETURN_IF_ERROR(PlanFor(layout, io, /*backward=*/false).status());
  return PlanFor(layout, io, /*backward=*/true).status();
}

absl::Status CudnnAttention::Run(const AttentionLayout& layout, GraphType io, bool backward,
                                 const AttentionPointers& pointers) {
  ASSIGN_OR_RETURN(CudnnAttentionPlan * plan, PlanFor(layout, io, backward));
  return plan->Execute(handle_, allocator_, pointers);
}

absl::Status CudnnAttention::Forward(const AttentionLayout& layout, GraphType io,
                                     const AttentionPointers& pointers) {
  return Run(layout, io, /*backward=*/false, pointers);
}

absl::Status CudnnAttention::Backward(const AttentionLayout& layout, GraphType io,
                                      const AttentionPointers& pointers) {
  return Run(layout, io, /*backward=*/true, pointers);
}

}  // namespace shardwise::cuda
