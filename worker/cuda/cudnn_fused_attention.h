#ifndef SHARDWISE_WORKER_CUDA_CUDNN_FUSED_ATTENTION_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_FUSED_ATTENTION_H_

// The device's FUSED attention through cuDNN's flash attention (cudnn_attention.h), for a
// job whose activations are stored as FP32 holding BF16 or FP16 values (compute/device.h:
// every stage rounds its outputs to param_dtype). The operands are narrowed into 16-bit
// scratch, which is exact because they already hold values of that type; cuDNN runs on
// them; its results are widened back, also exactly. The statistics (each query row's
// log-sum-exp) and the backward's dout . out stay FP32.
//
// The casts are the price of FP32 storage: per forward, 3 A reads and writes of qkv, A
// of out (A = heads x head_dim per token), per backward three times as many, a few tenths
// of a millisecond per GPT-2 step on an H200 against the ~16 ms cuDNN saves over the
// materialised products. They go once activations are stored in param_dtype (issue 47).
//
// q, k and v come packed (the GPT's qkv) or apart with fewer K/V heads (the Llama's
// grouped-query attention): cuDNN's graph reads each K/V head for its whole group of
// query heads and sums the group's gradients itself (attention_graph.h), so K and V are
// never repeated.
//
// Thread-safety: none; the training thread's, on the compute stream.

#include <cuda_runtime_api.h>

#include <vector>

#include "absl/status/status.h"
#include "worker/compute/attention_shape.h"
#include "worker/cuda/cudnn_attention.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::cuda {

class CudnnFusedAttention {
 public:
  // `runner` and `allocator` outlive this; the scratch comes from `allocator` on the
  // caller's stream, which must be `stream` (the runner's).
  CudnnFusedAttention(CudnnAttention* runner, Allocator* allocator, cudaStream_t stream)
      : runner_(runner), allocator_(allocator), stream_(stream) {}

  // out [batch, seq, heads * head_dim] and lse [batch, heads, seq] from q, k and v, in
  // `operands` (BF16 or FP16).
  absl::Status Forward(ScalarType operands, const AttentionShape& shape,
                       const QkvSpan<const float*>& qkv, float* out, float* lse);
  // The gradients of q, k and v (`dqkv`, laid out as `qkv`: CudaDevice checks it) from the
  // forward's q, k, v, out and lse and the gradient dout.
  absl::Status Backward(ScalarType operands, const AttentionShape& shape,
                        const QkvSpan<const float*>& qkv, const float* out, const float* lse,
                        const float* dout, const QkvSpan<float*>& dqkv);

 private:
  // A 16-bit copy of `n` values of `from` (FP32 storage of `operands` values).
  absl::StatusOr<Buffer> Narrowed(ScalarType operands, const float* from, size_t n);
  Buffer Scratch(ScalarType type, size_t n) const;
  // The 16-bit copies of q, k and v, bound into `pointers` (as kQkv, or kQ, kK and kV).
  absl::StatusOr<std::vector<Buffer>> NarrowedQkv(ScalarType operands, const AttentionShape& shape,
                                                  const QkvSpan<const float*>& qkv,
                                                  AttentionPointers* pointers);
  // 16-bit space for the gradients of `dqkv`, bound as kDqkv, or kDq, kDk and kDv.
  std::vector<Buffer> GradientScratch(ScalarType operands, const AttentionShape& shape,
                                      const QkvSpan<float*>& dqkv,
                                      AttentionPointers* pointers) const;
  // The gradients widened from `scratch` (GradientScratch's) into `dqkv`.
  absl::Status Widened(ScalarType operands, const AttentionShape& shape,
                       const std::vector<Buffer>& scratch, const QkvSpan<float*>& dqkv);

  CudnnAttention* const runner_;
  Allocator* const allocator_;
  const cudaStream_t stream_;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_FUSED_ATTENTION_H_
