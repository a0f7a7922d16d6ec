#ifndef SHARDWISE_WORKER_COMPUTE_CPU_MATH_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_MATH_H_

// The MLP's compute on CPU, fp32, row-major, with PyTorch's conventions: a Linear's
// weight is [out, in] and y = x W^T + b. GEMMs go through BLAS (OpenBLAS); the rest are
// plain loops. Every function is pure over its arguments.

#include <cstddef>
#include <cstdint>

#include "proto/job_spec.pb.h"
#include "worker/compute/optimizer_scalars.h"

namespace shardwise::cpu {

// BLAS threads for this process (one per worker by default: ranks are processes).
void SetBlasThreads(int threads);

// y[batch, out] = x[batch, in] W[out, in]^T (+ b[out] if b is not null).
void LinearForward(const float* x, const float* w, const float* b, int64_t batch, int64_t in,
                   int64_t out, float* y);

// Given dy[batch, out]: dx[batch, in] = dy W (skipped if dx is null);
// dw[out, in] += dy^T x; db[out] += column sums of dy (if db is not null).
void LinearBackward(const float* x, const float* w, const float* dy, int64_t batch, int64_t in,
                    int64_t out, float* dx, float* dw, float* db);

// y = act(x), elementwise.
void ActivationForward(v1::Activation act, const float* x, size_t n, float* y);
// dx = dy * act'(x), elementwise (in place allowed: dx == dy).
void ActivationBackward(v1::Activation act, const float* x, const float* dy, size_t n, float* dx);

// Mean cross-entropy over `batch` rows of logits[batch, classes] against int64 labels;
// writes dlogits = (softmax - onehot) * scale / batch. Returns the loss (times scale).
double CrossEntropy(const float* logits, const int64_t* labels, int64_t batch, int64_t classes,
                    float scale, float* dlogits);

// Mean squared error over all batch*out elements (torch.nn.MSELoss's default), with
// dpred = 2 (pred - target) * scale / (batch*out). Returns the loss (times scale).
double MeanSquaredError(const float* pred, const float* target, int64_t batch, int64_t out,
                        float scale, float* dpred);

// torch.optim.SGD on n elements; `first`: the momentum buffer becomes a copy of the
// gradient (a parameter's first step).
void SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad,
               float* momentum, size_t n);
// torch.optim.AdamW (single-tensor path) on n elements.
void AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                 float* exp_avg_sq, size_t n);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_MATH_H_
