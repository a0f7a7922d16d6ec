#include "worker/compute/cpu/activation.h"

#include "worker/compute/pointwise.h"

namespace shardwise::cpu {

template <typename T>
void ActivationForward(v1::Activation act, const T* x, size_t n, T* y) {
  switch (act) {
    case v1::GELU:
      for (size_t i = 0; i < n; ++i) y[i] = static_cast<T>(pointwise::Gelu(x[i]));
      return;
    case v1::GELU_TANH:
      for (size_t i = 0; i < n; ++i) y[i] = static_cast<T>(pointwise::GeluTanh(x[i]));
      return;
    default:
      for (size_t i = 0; i < n; ++i) y[i] = x[i] > T{0} ? x[i] : T{0};
  }
}

template <typename T>
void ActivationBackward(v1::Activation act, const T* x, const T* dy, size_t n, T* dx) {
  switch (act) {
    case v1::GELU:
      for (size_t i = 0; i < n; ++i) dx[i] = static_cast<T>(dy[i] * pointwise::GeluGrad(x[i]));
      return;
    case v1::GELU_TANH:
      for (size_t i = 0; i < n; ++i) {
        dx[i] = static_cast<T>(dy[i] * pointwise::GeluTanhGrad(x[i]));
      }
      return;
    default:
      for (size_t i = 0; i < n; ++i) dx[i] = x[i] > T{0} ? dy[i] : T{0};
  }
}

template void ActivationForward(v1::Activation, const float*, size_t, float*);
template void ActivationForward(v1::Activation, const double*, size_t, double*);
template void ActivationBackward(v1::Activation, const float*, const float*, size_t, float*);
template void ActivationBackward(v1::Activation, const double*, const double*, size_t, double*);

}  // namespace shardwise::cpu
