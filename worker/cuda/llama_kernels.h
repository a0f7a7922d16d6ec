#ifndef SHARDWISE_WORKER_CUDA_LLAMA_KERNELS_H_
#define SHARDWISE_WORKER_CUDA_LLAMA_KERNELS_H_

// The Llama's own layers on CUDA (RMSNorm, rotary embeddings, grouped-query K/V packing,
// the SwiGLU's product): the GPU counterparts of compute/cpu/llama_layers.h, running the
// same per-row functions (compute/llama_rows.h). As in kernels.h, each function enqueues
// on `stream` and returns the launch's error; pointers are device pointers; nothing uses
// float atomics, and every sum is taken in the CPU's order, so every result has the same
// bits on every run.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

// RMSNorm over rows of `dim`, one warp per row (norm_rows::RmsNormForwardRow: the squares
// summed in float in a fixed order, as Hugging Face computes the variance in float32; the
// CPU sums in double, so the two differ by rounding); keeps rstd [rows]. x and y (dy and
// dx below) share one type, FP32 or 16-bit (storage_elements.cuh); w is FP32 or of x's
// type (16-bit storage reads it in place, widened as read); else cudaErrorInvalidValue.
// rstd and dw are FP32.
cudaError_t RmsNormForward(ConstTensorRef x, ConstTensorRef w, int64_t rows, int64_t dim, float eps,
                           TensorRef y, float* rstd, cudaStream_t stream);
// x = x + residual (each sum rounded to their type as Accumulate rounds it), then
// RmsNormForward of that sum, in one kernel: a pre-norm block's residual and its norm.
// Without a residual (null), RmsNormForward itself.
cudaError_t AddRmsNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w, int64_t rows,
                              int64_t dim, float eps, TensorRef y, float* rstd,
                              cudaStream_t stream);
// Writes dx (one warp per row: norm_rows::RmsNormInputGradRow), or with `add_to_dx` adds
// it, rounded to dx's type, to what dx holds (the sum rounded); adds to dw (unless null)
// dy * (x * rstd) summed over the rows in the CPU's chunked order (llama_rows.h): a thread
// per column and chunk into `partials` (RmsNormBackwardPartials floats, from the caller),
// then a thread per column adding its chunks. x, dy and dx must be present, and
// `partials` with dw (cudaErrorInvalidValue otherwise).
size_t RmsNormBackwardPartials(int64_t rows, int64_t dim);
cudaError_t RmsNormBackward(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                            ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dx,
                            bool add_to_dx, float* dw, float* partials, cudaStream_t stream);

// Rotary embeddings in place on x [rows, heads * head_dim], one thread per rotated pair
// (llama_rows::RotatePair); row r is at position r % seq of the tables [positions,
// head_dim / 2]. `inverse`: the transpose (the backward). x FP32 or 16-bit (each pair
// rotated in float and rounded once as stored); the tables FP32.
cudaError_t Rotary(TensorRef x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                   int64_t heads, int64_t head_dim, bool inverse, cudaStream_t stream);

// qkv [rows, 3 * heads * head_dim] from q [rows, heads * head_dim] and k, v [rows, kv_heads *
// head_dim], query head h reading K/V head KvHeadOf(h) (compute/attention_shape.h): a copy,
// the four of one type (FP32 or 16-bit), else cudaErrorInvalidValue.
cudaError_t PackGroupedQkv(ConstTensorRef q, ConstTensorRef k, ConstTensorRef v, int64_t rows,
                           int64_t heads, int64_t kv_heads, int64_t head_dim, TensorRef qkv,
                           cudaStream_t stream);
// Its transpose: dq copied; dk, dv written (not added to), each element the sum of its
// query heads' gradients in head order, from zero, in float, as the CPU adds them. dqkv in
// any stored type (the CUDA-core attention hands over FP32 working space), dq, dk and dv
// of one type, each value rounded once as stored.
cudaError_t UnpackGroupedQkvGrad(ConstTensorRef dqkv, int64_t rows, int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, TensorRef dq, TensorRef dk, TensorRef dv,
                                 cudaStream_t stream);

// out[i] = a[i] * b[i], the three of one type, FP32 or 16-bit (the product in float,
// rounded once as stored), else cudaErrorInvalidValue.
cudaError_t MultiplyElementwise(ConstTensorRef a, ConstTensorRef b, size_t n, TensorRef out,
                                cudaStream_t stream);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_LLAMA_KERNELS_H_
