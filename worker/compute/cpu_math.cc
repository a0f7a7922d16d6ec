#include "worker/compute/cpu_math.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

extern "C" void openblas_set_num_threads(int num_threads);

namespace shardwise::cpu {

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

void LinearForward(const float* x, const float* w, const float* b, int64_t batch, int64_t in,
                   int64_t out, float* y) {
  if (b != nullptr) {
    for (int64_t i = 0; i < batch; ++i) std::copy(b, b + out, y + i * out);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in,
              b != nullptr ? 1.0f : 0.0f, y, out);
}

void LinearBackward(const float* x, const float* w, const float* dy, int64_t batch, int64_t in,
                    int64_t out, float* dx, float* dw, float* db) {
  if (dx != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in,
                0.0f, dx, in);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in,
              1.0f, dw, in);
  if (db != nullptr) {
    for (int64_t i = 0; i < batch; ++i) {
      const float* row = dy + i * out;
      for (int64_t j = 0; j < out; ++j) db[j] += row[j];
    }
  }
}

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

}  // namespace

void ActivationForward(v1::Activation act, const float* x, size_t n, float* y) {
  if (act == v1::GELU) {
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i];
      y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ActivationBackward(v1::Activation act, const float* x, const float* dy, size_t n, float* dx) {
  if (act == v1::GELU) {
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i];
      const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
      const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);
      dx[i] = static_cast<float>(dy[i] * (cdf + v * pdf));
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

double CrossEntropy(const float* logits, const int64_t* labels, int64_t batch, int64_t classes,
                    float scale, float* dlogits) {
  double total = 0;
  const float grad_scale = scale / static_cast<float>(batch);
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = logits + i * classes;
    float* grad = dlogits + i * classes;
    const float max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j] - max));
    const double log_sum = std::log(sum) + max;
    const int64_t label = labels[i];
    total += log_sum - row[label];
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(row[j] - log_sum);
      grad[j] = static_cast<float>(p - (j == label ? 1.0 : 0.0)) * grad_scale;
    }
  }
  return total / static_cast<double>(batch) * scale;
}

double MeanSquaredError(const float* pred, const float* target, int64_t batch, int64_t out,
                        float scale, float* dpred) {
  const int64_t n = batch * out;
  double total = 0;
  const float grad_scale = 2.0f * scale / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float diff = pred[i] - target[i];
    total += static_cast<double>(diff) * diff;
    dpred[i] = diff * grad_scale;
  }
  return total / static_cast<double>(n) * scale;
}

void SgdUpdate(const SgdScalars& s, bool first, float* p, const float* grad, float* b,
               size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (s.weight_decay != 0) g += s.weight_decay * p[i];
    if (s.momentum != 0) {
      b[i] = first ? g : s.momentum * b[i] + (1 - s.dampening) * g;
      g = s.nesterov ? g + s.momentum * b[i] : b[i];
    }
    p[i] -= s.lr * g;
  }
}

void AdamWUpdate(const AdamWScalars& s, float* p, const float* grad, float* m, float* v,
                 size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    p[i] *= s.decay;
    m[i] += s.one_minus_beta1 * (g - m[i]);  // exp_avg.lerp_(grad, 1 - beta1)
    v[i] = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[i]) / s.bias_correction2_sqrt + s.eps;
    p[i] -= s.step_size * (m[i] / denom);
  }
}

}  // namespace shardwise::cpu
