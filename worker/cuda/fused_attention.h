#ifndef SHARDWISE_WORKER_CUDA_FUSED_ATTENTION_H_
#define SHARDWISE_WORKER_CUDA_FUSED_ATTENTION_H_

// Fused (flash-style) causal self-attention on the GPU: compute/fused_attention_rows.h's
// row routines, one thread per row, on CUDA cores, summing in FP32. q, k, v, out and dout
// are read and written in their storage type: FP32, or a job's BF16/FP16 (16-bit storage,
// for the head sizes with register rows, contracts/cuda_attention_rows.h), widened as they
// are read and each output rounded once as it is stored, so 16-bit storage gets the bits
// FP32 storage gets by rounding its FP32 outputs. Memory is linear in seq: each query
// row's log-sum-exp [batch, heads, seq] instead of the probabilities. The rows a thread
// reads again and again sit in shared memory, its accumulators in registers, for head
// sizes 32, 64 and 128; other sizes run the routines on global memory (FP32 only: there
// the outputs are the accumulators). No atomics: the same bits on every run.
//
// As in transformer_kernels.h, each function enqueues on `stream` and returns the
// launch's error (cudaErrorInvalidValue for types it does not take); pointers are device
// pointers.

#include <cuda_runtime_api.h>

#include "worker/compute/attention_shape.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

// qkv [batch, seq, 3C] -> out [batch, seq, C] of qkv's type, lse [batch, heads, seq].
cudaError_t FusedAttentionForward(ConstTensorRef qkv, const AttentionShape& shape, TensorRef out,
                                  float* lse, cudaStream_t stream);

// Writes dqkv [batch, seq, 3C], FP32 or of qkv's type (out and dout are of qkv's type);
// `dots` [batch, heads, seq] is working space (each query row's dout . out, written by the
// dq pass and read by the dk/dv pass).
cudaError_t FusedAttentionBackward(ConstTensorRef qkv, ConstTensorRef out, const float* lse,
                                   ConstTensorRef dout, const AttentionShape& shape, float* dots,
                                   TensorRef dqkv, cudaStream_t stream);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_FUSED_ATTENTION_H_
