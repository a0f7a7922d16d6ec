#ifndef SHARDWISE_WORKER_COMPUTE_CPU_ACTIVATION_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_ACTIVATION_H_

// Elementwise activations on the CPU: ReLU, GELU (erf) and GELU (tanh), with the
// formulas of compute/pointwise.h (computed in double, rounded once to T).

#include <cstddef>

#include "proto/job_spec.pb.h"

namespace shardwise::cpu {

// y = act(x).
template <typename T>
void ActivationForward(v1::Activation act, const T* x, size_t n, T* y);

// dx = dy * act'(x) (in place allowed: dx == dy).
template <typename T>
void ActivationBackward(v1::Activation act, const T* x, const T* dy, size_t n, T* dx);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_ACTIVATION_H_
