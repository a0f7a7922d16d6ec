#ifndef SHARDWISE_WORKER_COMPUTE_CPU_OPTIMIZERS_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_OPTIMIZERS_H_

// The optimizer rules over n elements on the CPU: loops over compute/pointwise.h, the
// same per-element code the CUDA kernels run.

#include <cstddef>

#include "worker/compute/optimizer_scalars.h"

namespace shardwise::cpu {

// torch.optim.SGD; `first`: the momentum buffer becomes a copy of the gradient.
void SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad, float* momentum,
               size_t n);
// torch.optim.AdamW (single-tensor path).
void AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                 float* exp_avg_sq, size_t n);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_OPTIMIZERS_H_
