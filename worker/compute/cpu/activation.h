#ifndef SHARDWISE_WORKER_COMPUTE_CPU_ACTIVATION_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_ACTIVATION_H_

// Elementwise activations on the CPU: ReLU, GELU (erf), GELU (tanh) and SiLU, with the
// formulas of compute/pointwise.h (computed in double, rounded once to T), except GELU
// (erf) and SiLU in float: compute/float_math.h's vectorised forms (GELU within 2e-7 of the
// exact function times max(1, |x|), 3e-7 for its gradient, PyTorch's CPU kernel
// approximating erf the same way; SiLU within 4 ulp, its gradient within 2.4e-7).

#include <cstddef>

#include "proto/job_spec.pb.h"

namespace shardwise::cpu {

// y = act(x).
template <typename T>
void ActivationForward(v1::Activation act, const T* x, size_t n, T* y);
template <>
void ActivationForward(v1::Activation act, const float* x, size_t n, float* y);

// dx = dy * act'(x) (in place allowed: dx == dy).
template <typename T>
void ActivationBackward(v1::Activation act, const T* x, const T* dy, size_t n, T* dx);
template <>
void ActivationBackward(v1::Activation act, const float* x, const float* dy, size_t n, float* dx);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_ACTIVATION_H_
