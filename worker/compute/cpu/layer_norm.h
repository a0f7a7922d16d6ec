#ifndef SHARDWISE_WORKER_COMPUTE_CPU_LAYER_NORM_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_LAYER_NORM_H_

// nn.LayerNorm over the last dimension on the CPU (F.layer_norm), forward and backward:
//   mean = sum(x) / dim, var = sum((x - mean)^2) / dim (biased), rstd = 1 / sqrt(var + eps)
//   y = (x * rstd + (-rstd * mean)) * w + b          (PyTorch's CPU kernel's grouping)
// Statistics are summed in double and kept per row for the backward:
//   dw += sum_rows dy * (x - mean) * rstd,  db += sum_rows dy
//   dx  = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * w, xhat = (x - mean) * rstd
// A null w or b means none (weight 1, bias 0); then dw or db must be null too.

#include <cstdint>

namespace shardwise::cpu {

template <typename T>
void LayerNormForward(const T* x, const T* w, const T* b, int64_t rows, int64_t dim, T eps, T* y,
                      T* mean, T* rstd);

// dx[rows, dim] is written; dw and db [dim] are added to.
template <typename T>
void LayerNormBackward(const T* x, const T* w, const T* mean, const T* rstd, const T* dy,
                       int64_t rows, int64_t dim, T* dx, T* dw, T* db);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_LAYER_NORM_H_
