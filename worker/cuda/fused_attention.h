#ifndef SHARDWISE_WORKER_CUDA_FUSED_ATTENTION_H_
#define SHARDWISE_WORKER_CUDA_FUSED_ATTENTION_H_

// Fused (flash-style) causal self-attention on the GPU: compute/fused_attention_rows.h's
// row routines, one thread per row, on CUDA cores in FP32 (whatever the job's param_dtype:
// the 16-bit case reads the FP32 copies of values already rounded to 16 bits). Memory is
// linear in seq: each query row's log-sum-exp [batch, heads, seq] instead of the
// probabilities. The rows a thread reads again and again sit in shared memory, its
// accumulators in registers, for head sizes 32, 64 and 128; other sizes run the routines
// on global memory. No atomics: the same bits on every run.
//
// As in transformer_kernels.h, each function enqueues on `stream` and returns the
// launch's error; pointers are device pointers.

#include <cuda_runtime_api.h>

#include "worker/compute/attention_shape.h"

namespace shardwise::cuda {

// qkv [batch, seq, 3C] -> out [batch, seq, C], lse [batch, heads, seq].
cudaError_t FusedAttentionForward(const float* qkv, const AttentionShape& shape, float* out,
                                  float* lse, cudaStream_t stream);

// Writes dqkv [batch, seq, 3C]; `dots` [batch, heads, seq] is working space (each query
// row's dout . out, written by the dq pass and read by the dk/dv pass).
cudaError_t FusedAttentionBackward(const float* qkv, const float* out, const float* lse,
                                   const float* dout, const AttentionShape& shape, float* dots,
                                   float* dqkv, cudaStream_t stream);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_FUSED_ATTENTION_H_
