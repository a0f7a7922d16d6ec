#include "worker/compute/cpu/cpu_device.h"

#include <cmath>
#include <cstring>

#include "worker/compute/casts.h"
#include "worker/compute/cpu/activation.h"
#include "worker/compute/cpu/attention.h"
#include "worker/compute/cpu/embedding.h"
#include "worker/compute/cpu/fused_attention.h"
#include "worker/compute/cpu/layer_norm.h"
#include "worker/compute/cpu/linear.h"
#include "worker/compute/cpu/llama_layers.h"
#include "worker/compute/cpu/losses.h"
#include "worker/compute/cpu/optimizers.h"
#include "worker/compute/cpu/vector_clones.h"
#include "worker/compute/pointwise.h"

namespace shardwise {
namespace {

// The elementwise loops, cloned for the widest vectors the CPU has (vector_clones.h).
SHARDWISE_VECTOR_CLONES void AccumulateF(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

SHARDWISE_VECTOR_CLONES void MultiplyElementwiseF(const float* a, const float* b, size_t n,
                                                  float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

SHARDWISE_VECTOR_CLONES void MultiplyF(float* data, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i) data[i] *= factor;
}

SHARDWISE_VECTOR_CLONES void DivideF(float* data, size_t n, float divisor) {
  for (size_t i = 0; i < n; ++i) data[i] /= divisor;
}

}  // namespace

void CpuDevice::CopyFromHost(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

absl::Status CpuDevice::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
  return absl::OkStatus();
}

void CpuDevice::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuDevice::Zero(void* dst, size_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
}

void CpuDevice::Narrow(ScalarType type, const float* in, uint16_t* out, size_t n) {
  cpu::Narrow(type, in, out, n);
}

void CpuDevice::Widen(ScalarType type, const uint16_t* in, float* out, size_t n) {
  cpu::Widen(type, in, out, n);
}

void CpuDevice::RoundToPrecision(ScalarType type, float* data, size_t n) {
  cpu::RoundToPrecision(type, data, n);
}

void CpuDevice::Accumulate(float* dst, const float* src, size_t n) { AccumulateF(dst, src, n); }

void CpuDevice::MultiplyElementwise(const float* a, const float* b, size_t n, float* out) {
  MultiplyElementwiseF(a, b, n, out);
}

void CpuDevice::Multiply(float* data, size_t n, float factor) { MultiplyF(data, n, factor); }

void CpuDevice::Divide(float* data, size_t n, float divisor) { DivideF(data, n, divisor); }

absl::StatusOr<bool> CpuDevice::MultiplyAndCheckFinite(float* data, size_t n, float factor) {
  bool found_inf = false;
  for (size_t i = 0; i < n; ++i) {
    data[i] *= factor;
    if (!std::isfinite(data[i])) found_inf = true;
  }
  return found_inf;
}

void CpuDevice::AddSquaredNorm(const float* data, size_t n, double* sum) {
  double squares = 0;
  for (size_t i = 0; i < n; ++i) squares += static_cast<double>(data[i]) * data[i];
  *sum += squares;
}

void CpuDevice::DoubleToFloat(const double* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

void CpuDevice::ClipToNorm(float* data, size_t n, const float* squared_norm, double max_norm) {
  const float coef =
      pointwise::ClipCoefficient(std::sqrt(static_cast<double>(*squared_norm)), max_norm);
  if (coef < 1.0f) Multiply(data, n, coef);
}

// The operands' type changes nothing: they hold values of it already, and OpenBLAS
// multiplies them in FP32 (the CPU has no BF16/FP16 GEMM here).
void CpuDevice::LinearForward(const float* x, const float* w, const float* b, int64_t batch,
                              int64_t in, int64_t out, float* y, ScalarType) {
  cpu::LinearForward(x, w, b, batch, in, out, y);
}

void CpuDevice::LinearBackward(const float* x, const float* w, const float* dy, int64_t batch,
                               int64_t in, int64_t out, float* dx, float* dw, float* db,
                               ScalarType) {
  cpu::LinearBackward(x, w, dy, batch, in, out, dx, dw, db);
}

void CpuDevice::ActivationForward(v1::Activation act, const float* x, size_t n, float* y) {
  cpu::ActivationForward(act, x, n, y);
}

void CpuDevice::ActivationBackward(v1::Activation act, const float* x, const float* dy, size_t n,
                                   float* dx) {
  cpu::ActivationBackward(act, x, dy, n, dx);
}

void CpuDevice::EmbeddingForward(const float* table, const int64_t* ids, int64_t n, int64_t dim,
                                 float* out) {
  cpu::EmbeddingForward(table, ids, n, dim, out);
}

void CpuDevice::EmbeddingBackward(const int64_t* ids, const float* dout, int64_t n, int64_t dim,
                                  float* dtable) {
  cpu::EmbeddingBackward(ids, dout, n, dim, dtable);
}

void CpuDevice::LayerNormForward(const float* x, const float* w, const float* b, int64_t rows,
                                 int64_t dim, float eps, float* y, float* mean, float* rstd) {
  cpu::LayerNormForward(x, w, b, rows, dim, eps, y, mean, rstd);
}

void CpuDevice::LayerNormBackward(const float* x, const float* w, const float* mean,
                                  const float* rstd, const float* dy, int64_t rows, int64_t dim,
                                  float* dx, float* dw, float* db) {
  cpu::LayerNormBackward(x, w, mean, rstd, dy, rows, dim, dx, dw, db);
}

void CpuDevice::RmsNormForward(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                               float* y, float* rstd) {
  cpu::RmsNormForward(x, w, rows, dim, eps, y, rstd);
}

void CpuDevice::RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                                int64_t rows, int64_t dim, float* dx, float* dw) {
  cpu::RmsNormBackward(x, w, rstd, dy, rows, dim, dx, dw);
}

void CpuDevice::Rotary(float* x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                       int64_t heads, int64_t head_dim, bool inverse) {
  cpu::Rotary(x, cos, sin, rows, seq, heads, head_dim, inverse);
}

void CpuDevice::PackGroupedQkv(const float* q, const float* k, const float* v, int64_t rows,
                               int64_t heads, int64_t kv_heads, int64_t head_dim, float* qkv) {
  cpu::PackGroupedQkv(q, k, v, rows, heads, kv_heads, head_dim, qkv);
}

void CpuDevice::UnpackGroupedQkvGrad(const float* dqkv, int64_t rows, int64_t heads,
                                     int64_t kv_heads, int64_t head_dim, float* dq, float* dk,
                                     float* dv) {
  cpu::UnpackGroupedQkvGrad(dqkv, rows, heads, kv_heads, head_dim, dq, dk, dv);
}

// As for the GEMMs: operands already hold values of their type; the CPU computes in FP32.
void CpuDevice::AttentionForward(const float* qkv, const AttentionShape& s, float* out,
                                 float* probs, ScalarType) {
  cpu::AttentionForward(qkv, s.batch, s.seq, s.heads, s.head_dim, out, probs);
}

void CpuDevice::AttentionBackward(const float* qkv, const float* probs, const float* dout,
                                  const AttentionShape& s, float* dqkv, ScalarType) {
  cpu::AttentionBackward(qkv, probs, dout, s.batch, s.seq, s.heads, s.head_dim, dqkv);
}

void CpuDevice::FusedAttentionForward(const QkvSpan<const float>& qkv, const AttentionShape& shape,
                                      float* out, float* lse, ScalarType) {
  cpu::FusedAttentionForward(qkv, shape, out, lse);
}

void CpuDevice::FusedAttentionBackward(const QkvSpan<const float>& qkv, const float* out,
                                       const float* lse, const float* dout,
                                       const AttentionShape& shape, const QkvSpan<float>& dqkv,
                                       ScalarType) {
  Buffer dots(allocator_, shape.batch * shape.heads * shape.seq, MemoryCategory::kActivations,
              false);
  cpu::FusedAttentionBackward(qkv, out, lse, dout, shape, dots.data(), dqkv);
}

void CpuDevice::CrossEntropy(const float* logits, const int64_t* labels, int64_t batch,
                             int64_t classes, float scale, float* dlogits, double* loss) {
  *loss = cpu::CrossEntropy(logits, labels, batch, classes, scale, dlogits);
}

void CpuDevice::MeanSquaredError(const float* pred, const float* target, int64_t batch, int64_t out,
                                 float scale, float* dpred, double* loss) {
  *loss = cpu::MeanSquaredError(pred, target, batch, out, scale, dpred);
}

void CpuDevice::SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad,
                          float* momentum, size_t n) {
  cpu::SgdUpdate(s, first, param, grad, momentum, n);
}

void CpuDevice::AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                            float* exp_avg_sq, size_t n) {
  cpu::AdamWUpdate(s, param, grad, exp_avg, exp_avg_sq, n);
}

}  // namespace shardwise
