#ifndef SHARDWISE_WORKER_COMPUTE_FLOAT_MATH_H_
#define SHARDWISE_WORKER_COMPUTE_FLOAT_MATH_H_

// exp, erf, GELU and SiLU in float arithmetic alone: no library call, so that a loop over
// them vectorises (the CPU's activation loops; libm's erf and exp are scalar calls that
// took most of a GELU's time in double). Only +, -, *, / and conversions, which every
// vector width rounds the same way, so a result does not depend on the CPU it ran on
// as long as nothing contracts a multiply and an add into one FMA (the CPU kernels are
// built without -mfma; see compute/cpu/BUILD).
//
// Accuracy (float_math_test): ExpF within 2 ulp; ErfF within 4e-7 absolute (Abramowitz &
// Stegun 7.1.26, whose bound is 1.5e-7, plus float rounding; PyTorch's vectorised CPU
// erf uses the same formula); GeluF within 2e-7 and GeluGradF within 3e-7 of the exact
// functions, times max(1, |x|) (docs/semantics.md); SiluF within 4 ulp of the exact SiLU
// (where |silu| > 1e-30), SiluGradF within 2.4e-7 of its derivative.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "worker/compute/host_device.h"

namespace shardwise::float_math {

// exp(x): x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so n ln2 is exact), e^r by
// its Taylor series to r^7 (relative error below 6e-9 on that range), 2^n written into
// the exponent bits. Clamped to [-87, 88]: results stay normal floats (exp(-87) is
// 1.6e-38; callers here only need "about zero" below that).
SHARDWISE_HOST_DEVICE inline float ExpF(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f;  // 8 significant bits: n * kLn2High is exact
  constexpr float kLn2Low = -2.12194440e-4f;
  constexpr float kRoundToInteger = 12582912.0f;  // 1.5 * 2^23: adding it rounds to nearest
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = (x * kLog2e + kRoundToInteger) - kRoundToInteger;
  const float r = (x - n * kLn2High) - n * kLn2Low;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// For templates over float (training) and double (the gradient checks): ExpF in float,
// libm's exp in double.
SHARDWISE_HOST_DEVICE inline float Exp(float x) { return ExpF(x); }
SHARDWISE_HOST_DEVICE inline double Exp(double x) { return exp(x); }

// erf(x) = 1 - (a1 t + ... + a5 t^5) e^(-x^2), t = 1 / (1 + p |x|), odd in x.
SHARDWISE_HOST_DEVICE inline float ErfFromExp(float x, float exp_minus_x_squared) {
  const float ax = x < 0 ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  const float magnitude = 1.0f - poly * t * exp_minus_x_squared;
  return x < 0 ? -magnitude : magnitude;
}

SHARDWISE_HOST_DEVICE inline float ErfF(float x) { return ErfFromExp(x, ExpF(-x * x)); }

constexpr float kInvSqrt2F = 0.70710678118654752f;
constexpr float kInvSqrt2PiF = 0.39894228040143268f;

// GELU (erf): x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2.
SHARDWISE_HOST_DEVICE inline float GeluF(float x) {
  return 0.5f * x * (1.0f + ErfF(x * kInvSqrt2F));
}

// Its derivative, Phi(x) + x phi(x): one exp serves both, e^(-x^2 / 2).
SHARDWISE_HOST_DEVICE inline float GeluGradF(float x) {
  const float e = ExpF(-0.5f * x * x);
  const float cdf = 0.5f * (1.0f + ErfFromExp(x * kInvSqrt2F, e));
  return cdf + x * kInvSqrt2PiF * e;
}

// SiLU, x / (1 + e^-x) (torch's formula), and its derivative s (1 + x (1 - s)), s the
// sigmoid 1 / (1 + e^-x). Below x = -87 ExpF's clamp leaves |silu(x)| under 1e-36 instead of the
// true (smaller) value.
SHARDWISE_HOST_DEVICE inline float SiluF(float x) { return x / (1.0f + ExpF(-x)); }

SHARDWISE_HOST_DEVICE inline float SiluGradF(float x) {
  const float e = ExpF(-x);
  const float sigmoid = 1.0f / (1.0f + e);
  return sigmoid * (1.0f + x * (e * sigmoid));  // 1 - s = e s, without cancellation
}

}  // namespace shardwise::float_math

#endif  // SHARDWISE_WORKER_COMPUTE_FLOAT_MATH_H_
