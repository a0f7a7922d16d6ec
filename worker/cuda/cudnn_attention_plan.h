#ifndef SHARDWISE_WORKER_CUDA_CUDNN_ATTENTION_PLAN_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_ATTENTION_PLAN_H_

// One attention graph (attention_graph.h) as a cuDNN execution plan: its tensors and
// operations turned into backend descriptors one to one, an operation graph, and the first
// engine configuration cuDNN's heuristics rank that builds. For a deterministic graph (all
// but the atomic backward, attention_graph.h) only engines without cuDNN's
// NONDETERMINISTIC note are taken, so two runs of a job are bit for bit equal; where none
// builds, the refusal counts what was skipped and why.
//
// A plan is built for a target: the worker's GPU (its cuDNN handle), or a description of a
// GPU (cudnn_device_properties.h), for which cuDNN chooses and compiles the kernels on the
// CPU, so the CPU tests see which engine, kernels and workspace the GPU will get. Only a
// plan built for a handle runs.
//
// Thread-safety: none; a plan runs on its handle's stream, from one thread at a time.

#include <cudnn.h>

#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/cuda/attention_graph.h"
#include "worker/cuda/cudnn_backend.h"
#include "worker/runtime/memory.h"

namespace shardwise::cuda {

// The device pointer of each buffer a graph names (attention_graph.h's AttentionBuffer).
using AttentionPointers = std::map<AttentionBuffer, void*>;

// Where a plan is built for: exactly one of the two, either outliving the plan.
struct PlanTarget {
  cudnnHandle_t handle = nullptr;
  const BackendDescriptor* device = nullptr;  // a finalized DEVICEPROP descriptor
};

class CudnnAttentionPlan {
 public:
  static absl::StatusOr<std::unique_ptr<CudnnAttentionPlan>> Build(AttentionGraph graph,
                                                                   const PlanTarget& target);
  // Enqueues the graph on the handle's stream, its workspace borrowed from `allocator`;
  // FailedPrecondition for a plan built for a description.
  absl::Status Execute(cudnnHandle_t handle, Allocator* allocator,
                       const AttentionPointers& pointers);

  // cuDNN's workspace.
  int64_t workspace_bytes() const { return workspace_bytes_; }
  // What each call borrows from the caching allocator: the workspace and, for the atomic
  // backward, the FP32 dQ accumulator after it (at a 256-byte boundary).
  int64_t scratch_bytes() const;
  // cuDNN's global index of the engine chosen (CUDNN_ATTR_ENGINE_GLOBAL_INDEX), for logs.
  int64_t engine() const { return engine_; }

 private:
  CudnnAttentionPlan() = default;
  absl::Status BuildGraph(const PlanTarget& target);
  absl::Status ChoosePlan(const PlanTarget& target);
  // Binds the graph's tensors to `pointers` (the dQ accumulator to `accumulator`, the
  // plan's own) and enqueues the plan.
  absl::Status Run(cudnnHandle_t handle, const AttentionPointers& pointers, void* workspace,
                   void* accumulator);
  absl::Status Refusal(size_t configurations, int nondeterministic, int unread, int failed,
                       const absl::Status& last_failure) const;

  AttentionGraph graph_;
  std::vector<BackendDescriptor> tensors_, operations_, kept_;
  // The plan's configuration is kept while the plan lives, as NVIDIA's frontend keeps it
  // (no document says a finalized plan holds all it needs of it); destroyed after it.
  BackendDescriptor operation_graph_, engine_config_, plan_;
  int64_t workspace_bytes_ = 0;
  int64_t accumulator_bytes_ = 0;
  int64_t engine_ = -1;
  bool runnable_ = false;  // built for a handle, not a description
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_ATTENTION_PLAN_H_
