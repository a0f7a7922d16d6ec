#ifndef SHARDWISE_WORKER_COMPUTE_CPU_LLAMA_LAYERS_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_LLAMA_LAYERS_H_

// The Llama's own layers on the CPU, forward and backward: RMSNorm, rotary position
// embeddings and grouped-query K/V packing, with the formulas and layouts of
// compute/llama_rows.h (the rows the CUDA kernels run too) and compute/device.h.

#include <cstdint>

namespace shardwise::cpu {

template <typename T>
void RmsNormForward(const T* x, const T* w, int64_t rows, int64_t dim, T eps, T* y, T* rstd);

// dx[rows, dim] is written; dw [dim] is added to (each column's sum over rows in row order).
template <typename T>
void RmsNormBackward(const T* x, const T* w, const T* rstd, const T* dy, int64_t rows, int64_t dim,
                     T* dx, T* dw);

template <typename T>
void Rotary(T* x, const T* cos, const T* sin, int64_t rows, int64_t seq, int64_t heads,
            int64_t head_dim, bool inverse);

template <typename T>
void PackGroupedQkv(const T* q, const T* k, const T* v, int64_t rows, int64_t heads,
                    int64_t kv_heads, int64_t head_dim, T* qkv);

template <typename T>
void UnpackGroupedQkvGrad(const T* dqkv, int64_t rows, int64_t heads, int64_t kv_heads,
                          int64_t head_dim, T* dq, T* dk, T* dv);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_LLAMA_LAYERS_H_
