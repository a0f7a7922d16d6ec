#ifndef SHARDWISE_WORKER_CUDA_CUDNN_ATTENTION_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_ATTENTION_H_

// cuDNN's flash attention on the GPU: one plan per attention graph (attention_graph.h's
// descriptions, cudnn_attention_plan.h), built on first use and cached by layout, dtype and
// direction, run on the worker's stream with its workspace from the caching allocator.
// Where no deterministic engine builds, the call fails naming the graph (never a silent
// fallback to another kernel).
//
// Status: built with --config=cuda and tested by cudnn_attention_test on a GPU (against
// the CPU's FP64 attention); the CPU tests check the descriptions themselves
// (attention_graph_test) and cuDNN's plans for them on described GPUs
// (cudnn_attention_plan_test). The Device's FUSED attention runs it
// (cudnn_fused_attention.h; CudaDevice decides where, and falls back to its CUDA-core
// kernel where Prepare fails and the job does not insist on cuDNN).

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/cuda/attention_graph.h"
#include "worker/cuda/cudnn_attention_plan.h"
#include "worker/cuda/cudnn_requirements.h"
#include "worker/runtime/memory.h"

namespace shardwise::cuda {

// The cuDNN this process loaded and `gpu`'s compute capability: what the rules of
// cudnn_requirements.h are applied to.
absl::StatusOr<CudnnFacts> LoadedCudnnFacts(int gpu);

class CudnnAttention {
 public:
  // Fails, saying what is missing, where cuDNN cannot be loaded or is older than 9, or
  // cannot run the `backward` kind on the GPU of `facts` (LoadedCudnnFacts). Every
  // backward takes that kind (attention_graph.h).
  static absl::StatusOr<std::unique_ptr<CudnnAttention>> Create(
      const CudnnFacts& facts, cudaStream_t stream, Allocator* allocator,
      AttentionBackwardKind backward = AttentionBackwardKind::kDeterministic);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Builds (and caches) the plans of both directions for `layout` in `io`, running
  // nothing: an error here (no engine cuDNN can build for the graph on this GPU, a
  // sub-library missing) means neither direction can run.
  absl::Status Prepare(const AttentionLayout& layout, GraphType io);
  // Enqueue AttentionForwardGraph / AttentionBackwardGraph on the stream.
  absl::Status Forward(const AttentionLayout& layout, GraphType io,
                       const AttentionPointers& pointers);
  absl::Status Backward(const AttentionLayout& layout, GraphType io,
                        const AttentionPointers& pointers);

  // cudnnGetVersion() of the library loaded: 91900 for 9.19.0.
  int64_t version() const { return version_; }

 private:
  CudnnAttention(cudnnHandle_t handle, Allocator* allocator, int64_t version,
                 AttentionBackwardKind backward);
  // The cached plan of one graph, built on first use.
  absl::StatusOr<CudnnAttentionPlan*> PlanFor(const AttentionLayout& layout, GraphType io,
                                              bool backward);
  absl::Status Run(const AttentionLayout& layout, GraphType io, bool backward,
                   const AttentionPointers& pointers);

  cudnnHandle_t handle_;
  Allocator* allocator_;
  int64_t version_;
  AttentionBackwardKind backward_;
  absl::flat_hash_map<std::tuple<AttentionLayout, GraphType, bool>,
                      std::unique_ptr<CudnnAttentionPlan>>
      plans_;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_ATTENTION_H_
