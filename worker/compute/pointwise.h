#ifndef SHARDWISE_WORKER_COMPUTE_POINTWISE_H_
#define SHARDWISE_WORKER_COMPUTE_POINTWISE_H_

// The per-element arithmetic every device shares: the optimizer rules (PyTorch's
// formulas, docs/semantics.md "Optimizers") and the activations. The CPU loops
// (compute/cpu/) and the CUDA kernels (cuda/kernels.cu) both call these, so the two
// devices cannot drift apart by hand. Plain inline functions: nvcc compiles them for the
// device, the host compiler for the host.

#include <cmath>

#include "worker/compute/host_device.h"
#include "worker/compute/optimizer_scalars.h"

namespace shardwise::pointwise {

// torch.optim.SGD on one element. `first`: the momentum buffer is uninitialised and
// becomes a copy of the gradient (a parameter's first step).
SHARDWISE_HOST_DEVICE inline void SgdStep(const SgdScalars& s, bool first, float* p, float g,
                                          float* momentum) {
  if (s.weight_decay != 0) g += s.weight_decay * *p;
  if (s.momentum != 0) {
    *momentum = first ? g : s.momentum * *momentum + s.one_minus_dampening * g;
    g = s.nesterov ? g + s.momentum * *momentum : *momentum;
  }
  *p -= s.lr * g;
}

// torch.lerp(start, end, weight) in FP32: from the nearer end, as torch computes it (from
// `start` for weights below 0.5 in magnitude, else from `end`), so that a weight of 1 gives
// `end` exactly.
SHARDWISE_HOST_DEVICE inline float Lerp(float start, float end, float weight) {
  return fabsf(weight) < 0.5f ? start + weight * (end - start)
                              : end - (end - start) * (1.0f - weight);
}

// torch.optim.AdamW (single-tensor path) on one element: decoupled decay, the moments
// (exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq * beta2 + (1 - beta2) * grad^2), the step.
SHARDWISE_HOST_DEVICE inline void AdamWStep(const AdamWScalars& s, float* p, float g, float* m,
                                            float* v) {
  *p *= s.decay;
  *m = Lerp(*m, g, s.one_minus_beta1);
  *v = *v * s.beta2 + s.one_minus_beta2 * g * g;
  const float denom = sqrtf(*v) / s.bias_correction2_sqrt + s.eps;
  *p -= s.step_size * (*m / denom);
}

// torch's _amp_foreach_non_finite_check_and_unscale_ on one element: *x *= inv_scale, and
// whether *x was inf or NaN before (the input is checked, not the product: a finite
// gradient that an inverse scale above 1, after many backoffs, carries past FP32's
// largest value is unscaled to inf and does not skip the step, as in torch).
SHARDWISE_HOST_DEVICE inline bool UnscaleAndCheckNonFinite(float* x, float inv_scale) {
  const float in = *x;
  *x = in * inv_scale;
#ifdef __CUDA_ARCH__
  return !isfinite(in);
#else
  return !std::isfinite(in);
#endif
}

// Global-norm clipping (torch.nn.utils.clip_grad_norm_, FSDP's clip_grad_norm_): every
// gradient is multiplied by min(max_norm / (norm + 1e-6), 1), with the norm the square root
// of the all-reduced FP32 sum of squares. Computed as torch computes it on an FP32 tensor,
// each operation rounded to FP32: `total ** (1 / 2)` (a square root), `+ 1e-6`, and a
// number over a tensor, which is the tensor's reciprocal times the number (one ulp apart
// from the quotient in double for about a third of the norms). The device computes it
// from the sum on the device, so no host reads the norm. A NaN sum gives 1 (fminf).
SHARDWISE_HOST_DEVICE inline float ClipCoefficient(float squared_norm, double max_norm) {
  const float reciprocal = 1.0f / (sqrtf(squared_norm) + 1e-6f);
  return fminf(reciprocal * static_cast<float>(max_norm), 1.0f);
}

// Activations in double, rounded once by the caller: GELU is x * Phi(x) (torch.nn.GELU())
// and GELU_TANH its tanh approximation (approximate="tanh"); SILU below.
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluTanhCubic = 0.044715;

SHARDWISE_HOST_DEVICE inline double Gelu(double x) { return 0.5 * x * (1.0 + erf(x * kInvSqrt2)); }

SHARDWISE_HOST_DEVICE inline double GeluGrad(double x) {
  const double cdf = 0.5 * (1.0 + erf(x * kInvSqrt2));
  const double pdf = kInvSqrt2Pi * exp(-0.5 * x * x);
  return cdf + x * pdf;
}

SHARDWISE_HOST_DEVICE inline double GeluTanh(double x) {
  return 0.5 * x * (1.0 + tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x)));
}

SHARDWISE_HOST_DEVICE inline double GeluTanhGrad(double x) {
  const double t = tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x));
  const double inner_grad = kSqrt2OverPi * (1.0 + 3.0 * kGeluTanhCubic * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_grad;
}

// SILU, x * sigmoid(x), as torch computes it (x / (1 + e^-x)), and its derivative
// sigmoid(x) (1 + x (1 - sigmoid(x))).
SHARDWISE_HOST_DEVICE inline double Silu(double x) { return x / (1.0 + exp(-x)); }

SHARDWISE_HOST_DEVICE inline double SiluGrad(double x) {
  const double sigmoid = 1.0 / (1.0 + exp(-x));
  return sigmoid * (1.0 + x * (1.0 - sigmoid));
}

// The same activations in float with the math library's erff, tanhf and expf, as
// PyTorch's CUDA kernels compute them for FP32, BF16 and FP16 inputs (in float, their
// "opmath" type): what the CUDA kernels run (cuda/kernels.cu). Within 3e-7 · max(1, |x|)
// of the exact functions (pointwise_test, with glibc's float functions; the device's are
// within 2 ulp of them): 1 + erf and 1 + tanh cancel for negative x, as in PyTorch's.
// SiluGradFloat takes 1 - s as the sigmoid of -x, without the cancellation PyTorch's 1 - s
// has for large x (a rounding-level difference).
constexpr float kInvSqrt2F = 0.70710678118654752f;
constexpr float kInvSqrt2PiF = 0.39894228040143268f;
constexpr float kSqrt2OverPiF = 0.79788456080286536f;
constexpr float kGeluTanhCubicF = 0.044715f;

SHARDWISE_HOST_DEVICE inline float GeluFloat(float x) {
  return 0.5f * x * (1.0f + erff(x * kInvSqrt2F));
}

SHARDWISE_HOST_DEVICE inline float GeluGradFloat(float x) {
  const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2F));
  const float pdf = kInvSqrt2PiF * expf(-0.5f * x * x);
  return cdf + x * pdf;
}

SHARDWISE_HOST_DEVICE inline float GeluTanhFloat(float x) {
  const float inner = kSqrt2OverPiF * (x + kGeluTanhCubicF * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

SHARDWISE_HOST_DEVICE inline float GeluTanhGradFloat(float x) {
  const float t = tanhf(kSqrt2OverPiF * (x + kGeluTanhCubicF * x * x * x));
  const float sech_squared = 1.0f - t * t;
  // Saturated (|x| beyond ~10): the second term is 0, whatever x^2 overflowed to.
  if (sech_squared == 0.0f) return 0.5f * (1.0f + t);
  const float inner_grad = kSqrt2OverPiF * (1.0f + 3.0f * kGeluTanhCubicF * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * sech_squared * inner_grad;
}

SHARDWISE_HOST_DEVICE inline float SiluFloat(float x) { return x / (1.0f + expf(-x)); }

SHARDWISE_HOST_DEVICE inline float SiluGradFloat(float x) {
  const float sigmoid = 1.0f / (1.0f + expf(-x));
  const float complement = 1.0f / (1.0f + expf(x));  // 1 - sigmoid, the sigmoid of -x
  return sigmoid * (1.0f + x * complement);
}

// The cross-entropy of one row of logits on GPUs, in float as PyTorch's CUDA log_softmax
// and its backward compute it (float is their "opmath" type for FP32, BF16 and FP16
// logits), which a GPU runs at its full rate (a double exp is a long software routine,
// and many GPUs run FP64 at 1/64 of FP32): each term exp(x - max) in float; their sum in
// double (PyTorch's is in float: a rounding-level difference, toward the exact sum);
// log_sum = log(sum) + max in double; the loss log_sum - x[label] in double; the
// gradient (exp(x - log_sum) - [x is the label's]) * grad_scale in float.
SHARDWISE_HOST_DEVICE inline float SoftmaxTerm(float x, float max) { return expf(x - max); }

SHARDWISE_HOST_DEVICE inline double LogSumExp(double sum_of_terms, float max) {
  return log(sum_of_terms) + max;
}

SHARDWISE_HOST_DEVICE inline float CrossEntropyGradient(float x, double log_sum, bool at_label,
                                                        float grad_scale) {
  const float p = expf(static_cast<float>(x - log_sum));
  return (at_label ? p - 1.0f : p) * grad_scale;
}

// Their error, for a row whose logits lie within `spread` of its max, of `classes` logits,
// with an expf within 2 ulp (CUDA's documented bound; glibc's is within 1): a term's
// argument x - max is rounded to float (relative error spread · 2^-24 in the term) and
// expf adds 2^-22, so the sum, log_sum and the loss are within
// LogSumExpError = spread · 2^-24 + 2^-22 (absolute, for log_sum and the loss).
// A probability's argument x - log_sum (at most spread + log(classes) in size) adds its
// own rounding, log_sum's error and expf's: relative ProbabilityError =
// LogSumExpError + (spread + log(classes)) · 2^-24 + 2^-22; the subtraction of 1 and the
// product with grad_scale round twice more, 2^-23 of the result. A probability below
// the smallest normal float (1.2e-38) is only within that much of it, absolutely.
SHARDWISE_HOST_DEVICE inline double LogSumExpError(double spread) {
  return spread * 0x1p-24 + 0x1p-22;
}

SHARDWISE_HOST_DEVICE inline double ProbabilityError(double spread, double classes) {
  return LogSumExpError(spread) + (spread + log(classes)) * 0x1p-24 + 0x1p-22;
}

// How far CrossEntropyGradient may be from the exact gradient `exact` of a logit whose
// exact probability is `p` (the tests' bound): the probability's error scaled, plus the
// last two roundings. A float grad_scale's own rounding is the caller's to add.
SHARDWISE_HOST_DEVICE inline double CrossEntropyGradientError(double p, double exact,
                                                              double grad_scale, double spread,
                                                              double classes) {
  constexpr double kSmallestNormalFloat = 0x1p-126;
  const double magnitude = exact < 0 ? -exact : exact;
  return grad_scale * (p * ProbabilityError(spread, classes) + kSmallestNormalFloat) +
         magnitude * 0x1p-23;
}

}  // namespace shardwise::pointwise

#endif  // SHARDWISE_WORKER_COMPUTE_POINTWISE_H_
