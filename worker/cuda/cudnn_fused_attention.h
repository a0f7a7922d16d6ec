#ifndef SHARDWISE_WORKER_CUDA_CUDNN_FUSED_ATTENTION_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_FUSED_ATTENTION_H_

// The device's FUSED attention through cuDNN's flash attention (cudnn_attention.h), in
// BF16 or FP16 operands. A tensor stored in the operands' type (Device::StorageType's
// 16-bit storage) is bound as it is; one stored in FP32 (holding values of that type:
// every stage rounds its outputs to param_dtype) is narrowed into 16-bit scratch first,
// exactly, and a result stored in FP32 is widened back from cuDNN's 16-bit output, also
// exactly. The statistics (each query row's log-sum-exp) and the backward's dout . out
// stay FP32.
//
// The casts are the price of FP32 storage: per forward, 3 A reads and writes of qkv, A
// of out (A = heads x head_dim per token), per backward three times as many, a few tenths
// of a millisecond per GPT-2 step on an H200 against the ~16 ms cuDNN saves over the
// materialised products. 16-bit storage has none.
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
#include "worker/cuda/typed_operand.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

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
                       const QkvSpan<ConstTensorRef>& qkv, TensorRef out, float* lse);
  // The gradients of q, k and v (`dqkv`, laid out as `qkv`: CudaDevice checks it) from the
  // forward's q, k, v, out and lse and the gradient dout.
  absl::Status Backward(ScalarType operands, const AttentionShape& shape,
                        const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out, const float* lse,
                        ConstTensorRef dout, const QkvSpan<TensorRef>& dqkv);

 private:
  // A result cuDNN writes into 16-bit scratch, to be widened into its FP32 place after.
  struct PendingWiden {
    Buffer scratch;
    float* target;
    size_t n;
  };
  Buffer Scratch(ScalarType type, size_t n) const;
  // What cuDNN reads for `value` (n elements): itself where it is stored in `operands`,
  // else a narrowed copy; either kept in `copies` (typed_operand.h).
  absl::StatusOr<void*> Input(ScalarType operands, ConstTensorRef value, size_t n,
                              std::vector<TypedOperand>* copies);
  // Where cuDNN writes `value`: itself where it is stored in `operands`, else 16-bit
  // scratch that `pending` widens into it after the run (WidenPending).
  void* Output(ScalarType operands, TensorRef value, size_t n,
               std::vector<PendingWiden>* pending) const;
  absl::Status WidenPending(ScalarType operands, const std::vector<PendingWiden>& pending);
  // q, k and v (or their gradients) bound as kQkv, or kQ, kK and kV (kDqkv...).
  absl::Status BindInputs(ScalarType operands, const AttentionShape& shape,
                          const QkvSpan<ConstTensorRef>& qkv, AttentionPointers* pointers,
                          std::vector<TypedOperand>* copies);
  void BindGradients(ScalarType operands, const AttentionShape& shape,
                     const QkvSpan<TensorRef>& dqkv, AttentionPointers* pointers,
                     std::vector<PendingWiden>* pending) const;

  CudnnAttention* const runner_;
  Allocator* const allocator_;
  const cudaStream_t stream_;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_FUSED_ATTENTION_H_
