#ifndef SHARDWISE_WORKER_CUDA_TRANSFORMER_KERNELS_H_
#define SHARDWISE_WORKER_CUDA_TRANSFORMER_KERNELS_H_

// The GPT's layers on CUDA, but their GEMMs (blas.h, attention.h): the GPU counterparts of
// compute/cpu/embedding.h, layer_norm.h and attention.h's softmax, with the same formulas.
// As in kernels.h, each function enqueues on `stream` and returns the launch's error;
// pointers are device pointers; nothing uses float atomics, so every result has the same
// bits on every run.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

// out[i, :] = table[ids[i], :] for i < n; table and out each FP32 or 16-bit
// (storage_elements.cuh), cudaErrorInvalidValue for another type.
cudaError_t EmbeddingForward(ConstTensorRef table, const int64_t* ids, int64_t n, int64_t dim,
                             TensorRef out, cudaStream_t stream);

// dtable[ids[i], :] += dout[i, :], each row's contributions added in the order of i, as the
// CPU loop adds them (so the sums are the CPU's bit for bit): the positions are sorted by
// id with a stable radix sort, then one block per distinct id walks its run.
// `scratch` holds EmbeddingBackwardScratchBytes(n) bytes; n < 2^31. dout FP32 or 16-bit
// (widened as it is read), else cudaErrorInvalidValue.
size_t EmbeddingBackwardScratchBytes(int64_t n);
cudaError_t EmbeddingBackward(const int64_t* ids, ConstTensorRef dout, int64_t n, int64_t dim,
                              float* dtable, void* scratch, size_t scratch_bytes,
                              cudaStream_t stream);

// LayerNorm over rows of `dim` (w, b may be null: 1 and 0), one warp per row, its sums in
// float in compute/norm_rows.h's fixed order (the CPU sums in double: the two differ by
// rounding); keeps mean and rstd [rows]. x and y (dy and dx below) share one type, FP32 or
// 16-bit (storage_elements.cuh); w and b are FP32 or of x's type (16-bit storage reads
// them in place, widened as read); else cudaErrorInvalidValue. The statistics and the
// parameter gradients are FP32.
cudaError_t LayerNormForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t rows,
                             int64_t dim, float eps, TensorRef y, float* mean, float* rstd,
                             cudaStream_t stream);
// x = x + residual (each sum rounded to their type as Accumulate rounds it), then
// LayerNormForward of that sum, in one kernel: a pre-norm block's residual and its norm.
// Without a residual (null), LayerNormForward itself.
cudaError_t AddLayerNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w,
                                ConstTensorRef b, int64_t rows, int64_t dim, float eps, TensorRef y,
                                float* mean, float* rstd, cudaStream_t stream);
// Writes dx (one warp per row, as the forward), or with `add_to_dx` adds it, rounded to
// dx's type, to what dx holds (the sum rounded: the values of a write then Accumulate);
// adds to dw and db (null when w, b are).
// The parameter gradients are summed
// over rows in fixed chunks (partial sums in double, then the chunks in order):
// `partials` holds LayerNormBackwardPartials(rows, dim) doubles.
size_t LayerNormBackwardPartials(int64_t rows, int64_t dim);
cudaError_t LayerNormBackward(ConstTensorRef x, ConstTensorRef w, const float* mean,
                              const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                              TensorRef dx, bool add_to_dx, float* dw, float* db, double* partials,
                              cudaStream_t stream);

// Causal softmax in place over `rows` rows of `seq` scores, row r being query position
// r % seq of its [seq, seq] matrix: p_j = softmax(s_j * scale) over j <= i, 0 above.
cudaError_t CausalSoftmaxForward(float* scores, int64_t rows, int64_t seq, float scale,
                                 cudaStream_t stream);
// Its backward, in place: dS = P * (dP - rowsum(dP * P)) * scale below the diagonal, 0
// above.
cudaError_t CausalSoftmaxBackward(const float* probs, float* grad, int64_t rows, int64_t seq,
                                  float scale, cudaStream_t stream);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_TRANSFORMER_KERNELS_H_
