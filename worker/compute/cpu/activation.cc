#include "worker/compute/cpu/activation.h"

#include "worker/compute/cpu/vector_clones.h"
#include "worker/compute/float_math.h"
#include "worker/compute/pointwise.h"

namespace shardwise::cpu {
namespace {

// The exact formulas, in double (the gradient checks' type, and GELU_TANH and ReLU).
template <typename T>
void ExactForward(v1::Activation act, const T* x, size_t n, T* y) {
  switch (act) {
    case v1::GELU:
      for (size_t i = 0; i < n; ++i) y[i] = static_cast<T>(pointwise::Gelu(x[i]));
      return;
    case v1::GELU_TANH:
      for (size_t i = 0; i < n; ++i) y[i] = static_cast<T>(pointwise::GeluTanh(x[i]));
      return;
    case v1::SILU:
      for (size_t i = 0; i < n; ++i) y[i] = static_cast<T>(pointwise::Silu(x[i]));
      return;
    default:
      for (size_t i = 0; i < n; ++i) y[i] = x[i] > T{0} ? x[i] : T{0};
  }
}

template <typename T>
void ExactBackward(v1::Activation act, const T* x, const T* dy, size_t n, T* dx) {
  switch (act) {
    case v1::GELU:
      for (size_t i = 0; i < n; ++i) dx[i] = static_cast<T>(dy[i] * pointwise::GeluGrad(x[i]));
      return;
    case v1::GELU_TANH:
      for (size_t i = 0; i < n; ++i) {
        dx[i] = static_cast<T>(dy[i] * pointwise::GeluTanhGrad(x[i]));
      }
      return;
    case v1::SILU:
      for (size_t i = 0; i < n; ++i) dx[i] = static_cast<T>(dy[i] * pointwise::SiluGrad(x[i]));
      return;
    default:
      for (size_t i = 0; i < n; ++i) dx[i] = x[i] > T{0} ? dy[i] : T{0};
  }
}

// GELU and SiLU in float (compute/float_math.h): loops GCC vectorises, cloned for the
// widest vectors the CPU has (vector_clones.h; the same results on each).
SHARDWISE_VECTOR_CLONES void GeluForwardF(const float* x, size_t n, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = float_math::GeluF(x[i]);
}

SHARDWISE_VECTOR_CLONES void GeluBackwardF(const float* x, const float* dy, size_t n, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * float_math::GeluGradF(x[i]);
}

SHARDWISE_VECTOR_CLONES void SiluForwardF(const float* x, size_t n, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = float_math::SiluF(x[i]);
}

SHARDWISE_VECTOR_CLONES void SiluBackwardF(const float* x, const float* dy, size_t n, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * float_math::SiluGradF(x[i]);
}

}  // namespace

template <typename T>
void ActivationForward(v1::Activation act, const T* x, size_t n, T* y) {
  ExactForward(act, x, n, y);
}

template <>
void ActivationForward(v1::Activation act, const float* x, size_t n, float* y) {
  if (act == v1::GELU) return GeluForwardF(x, n, y);
  if (act == v1::SILU) return SiluForwardF(x, n, y);
  ExactForward(act, x, n, y);
}

template <typename T>
void ActivationBackward(v1::Activation act, const T* x, const T* dy, size_t n, T* dx) {
  ExactBackward(act, x, dy, n, dx);
}

template <>
void ActivationBackward(v1::Activation act, const float* x, const float* dy, size_t n, float* dx) {
  if (act == v1::GELU) return GeluBackwardF(x, dy, n, dx);
  if (act == v1::SILU) return SiluBackwardF(x, dy, n, dx);
  ExactBackward(act, x, dy, n, dx);
}

template void ActivationForward(v1::Activation, const double*, size_t, double*);
template void ActivationBackward(v1::Activation, const double*, const double*, size_t, double*);

}  // namespace shardwise::cpu
