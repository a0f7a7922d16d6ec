#ifndef SHARDWISE_WORKER_CUDA_ATTENTION_H_
#define SHARDWISE_WORKER_CUDA_ATTENTION_H_

// Causal multi-head self-attention on the GPU with the formulas and layout of
// compute/cpu/attention.h: for each sequence, one cuBLAS strided-batched GEMM over its
// heads per product (S = q k^T, out = P v; backward dP = dout v^T, dv = P^T dout,
// dq = dS k, dk = dS^T q), and the causal softmax kernels of transformer_kernels.h
// between them. The probabilities [batch, heads, seq, seq] are materialised and kept for
// the backward, as on the CPU, so their memory grows with seq^2 (docs/architecture.md,
// "CUDA data plane", says what a fused kernel would change).
//
// With 16-bit `operands` (mixed precision) the GEMMs run on tensor cores and accumulate in
// FP32: they read q, k, v and dout in place where those are stored in the operands' type
// (Device::StorageType), else 16-bit copies of their FP32 storage, and 16-bit copies of P
// and dS; scores and probabilities are FP32, out and the gradients written in their own
// storage type.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "worker/compute/attention_shape.h"
#include "worker/cuda/blas.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

// Where the products run: cuBLAS (on `stream`), and the allocator of their working space.
struct AttentionContext {
  Blas* blas;
  Allocator* allocator;
  cudaStream_t stream;
  ScalarType operands;
};

// qkv [batch, seq, 3 * width] -> out [batch, seq, width], probs [batch, heads, seq, seq].
absl::Status AttentionForward(const AttentionContext& context, const AttentionShape& shape,
                              ConstTensorRef qkv, TensorRef out, float* probs);
// Writes dqkv [batch, seq, 3 * width].
absl::Status AttentionBackward(const AttentionContext& context, const AttentionShape& shape,
                               ConstTensorRef qkv, const float* probs, ConstTensorRef dout,
                               TensorRef dqkv);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_ATTENTION_H_
