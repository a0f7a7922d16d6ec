#ifndef SHARDWISE_WORKER_CUDA_CUDNN_REQUIREMENTS_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_REQUIREMENTS_H_

// What cuDNN's fused attention (attention_graph.h) needs, decided from what a CUDA worker
// reads at start: cudnnGetVersion() and the GPU's compute capability. Pure, so the CPU
// tests check each refusal; every refusal names what was found and what is needed.
//
// The rules are cuDNN's own limits for the flash-attention graphs, forward and backward:
//   - cuDNN 9 or newer (the GEN_INDEX causal pattern and grouped-query products), but not
//     9.10.0 or 9.10.1, whose 16-bit flash-attention kernels have known bugs;
//   - a sequence length of at least 2 (the backward takes no single-token sequences);
//   - before cuDNN 9.16, a sequence length that is a multiple of 128 (older versions need
//     a padding mask for the others, which these graphs do not carry);
//   - a GPU of compute capability 8.0 (Ampere) or newer;
//   - a head size that is a multiple of 8, at most 128 (256 on compute capability 9.x);
//   - query heads a multiple of the K/V heads;
//   - BF16 or FP16 operands: cuDNN's flash attention has no FP32 kernel, so an FP32 job's
//     FUSED attention stays on the CUDA-core kernel (fused_attention.h);
//   - for the atomic backward (cuda.attention_backward ATOMIC), cuDNN 9.6 or newer, which
//     clears its FP32 dQ accumulator itself (before it, NVIDIA's frontend cleared it).
// cudnn_attention_plan_test holds the head sizes to cuDNN 9.19's own answers.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"
#include "worker/cuda/attention_graph.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::cuda {

struct CudnnFacts {
  int64_t version = 0;         // cudnnGetVersion(): 91900 for 9.19.0, 8907 for 8.9.7
  int compute_capability = 0;  // major * 10 + minor: 90 for an H100 or H200
};

// "9.19.0" for 91900, "8.9.7" for 8907.
std::string CudnnVersionText(int64_t version);

// OK for cuDNN 9 or newer, else FailedPrecondition naming the version found.
absl::Status CheckCudnnVersion(int64_t version);

// OK where the `backward` kind runs as promised with cuDNN and the GPU of `facts`: the
// atomic one from cuDNN 9.6 (before it, nothing clears the dQ accumulator); the
// deterministic one on Ampere and Hopper (compute capability 8.x and 9.x: on Blackwell
// its bits are not guaranteed). Else FailedPrecondition naming what was found.
absl::Status CheckCudnnBackwardKind(const CudnnFacts& facts, AttentionBackwardKind backward);

// OK where attention_graph's graphs can run for `layout` in `io` with the `backward`
// kind, else FailedPrecondition saying why.
absl::Status CheckCudnnAttention(
    const CudnnFacts& facts, const AttentionLayout& layout, GraphType io,
    AttentionBackwardKind backward = AttentionBackwardKind::kDeterministic);

// The backward a job asks for (cuda.attention_backward).
AttentionBackwardKind BackwardKindOf(v1::CudaOptions::AttentionBackward option);

// The graphs' dtype for a job's compute dtype: BF16, FP16, else FP32 (kFloat).
GraphType GraphIo(ScalarType compute);

enum class FusedAttentionKernel { kCudnn, kCudaCores };

// A FUSED attention's kernel and, for the worker's log, why.
struct FusedAttentionChoice {
  FusedAttentionKernel kernel = FusedAttentionKernel::kCudaCores;
  std::string reason;
};

// The kernel that runs a FUSED attention of `layout` with `operands` (param_dtype), as the
// job's cuda.fused_attention_kernel asks, by the rules above: CUDA_CORES, CUDA cores;
// CUDNN, cuDNN or CheckCudnnAttention's refusal (FailedPrecondition, naming what is
// missing); unspecified, cuDNN where CheckCudnnAttention passes, else CUDA cores.
absl::StatusOr<FusedAttentionChoice> ChooseFusedAttentionKernel(
    v1::CudaOptions::FusedAttentionKernel requested, const CudnnFacts& facts,
    const AttentionLayout& layout, ScalarType operands,
    AttentionBackwardKind backward = AttentionBackwardKind::kDeterministic);

// The last step where the rules chose cuDNN: `plans` is what building cuDNN's plans for
// both directions returned. Built, cuDNN; not, the CUDA-core kernel, or the refusal
// where the job insists on cuDNN. The device decides once per shape and dtype, so the
// forward and the backward (which reads the forward's statistics) take the same kernel.
absl::StatusOr<FusedAttentionChoice> ConfirmCudnnAttention(
    v1::CudaOptions::FusedAttentionKernel requested, const CudnnFacts& facts,
    const absl::Status& plans);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_REQUIREMENTS_H_
