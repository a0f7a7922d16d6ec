#ifndef SHARDWISE_WORKER_COMPUTE_CPU_LINEAR_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_LINEAR_H_

// nn.Linear on the CPU, row-major, with PyTorch's convention: the weight is [out, in] and
// y = x W^T + b. T is float (training) or double (gradient checks).

#include <cstdint>

namespace shardwise::cpu {

// y[batch, out] = x[batch, in] W[out, in]^T (+ b[out] if b is not null).
template <typename T>
void LinearForward(const T* x, const T* w, const T* b, int64_t batch, int64_t in, int64_t out,
                   T* y);

// Given dy[batch, out]: dx[batch, in] = dy W (skipped if dx is null);
// dw[out, in] += dy^T x; db[out] += column sums of dy (if db is not null).
template <typename T>
void LinearBackward(const T* x, const T* w, const T* dy, int64_t batch, int64_t in, int64_t out,
                    T* dx, T* dw, T* db);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_LINEAR_H_
