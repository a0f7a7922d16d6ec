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
#include "worker/compute/float_views.h"
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

void CpuDevice::Accumulate(TensorRef dst, ConstTensorRef src, size_t n) {
  const FloatInput from(*this, src, n);
  const FloatOutput to(*this, dst, n, /*read_first=*/true);
  AccumulateF(to.get(), from.get(), n);
}

void CpuDevice::MultiplyElementwise(ConstTensorRef a, ConstTensorRef b, size_t n, TensorRef out) {
  const FloatInput fa(*this, a, n), fb(*this, b, n);
  const FloatOutput result(*this, out, n);
  MultiplyElementwiseF(fa.get(), fb.get(), n, result.get());
}

void CpuDevice::Multiply(float* data, size_t n, float factor) { MultiplyF(data, n, factor); }

void CpuDevice::Divide(float* data, size_t n, float divisor) { DivideF(data, n, divisor); }

absl::StatusOr<bool> CpuDevice::MultiplyAndCheckFinite(float* data, size_t n, float factor) {
  bool found_inf = false;
  for (size_t i = 0; i < n; ++i) {
    found_inf |= pointwise::UnscaleAndCheckNonFinite(data + i, factor);
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

void CpuDevice::ClipToNorm(float* data, size_t n, const float* squared_norm, double max_norm,
                           ScalarType values) {
  float coef = pointwise::ClipCoefficient(*squared_norm, max_norm);
  if (coef >= 1.0f) return;
  cpu::RoundToPrecision(values, &coef, 1);  // torch's coef.to(grad.dtype)
  Multiply(data, n, coef);
  cpu::RoundToPrecision(values, data, n);
}

// The operands' type changes nothing: they hold values of it already, and OpenBLAS
// multiplies them in FP32 (the CPU has no BF16/FP16 GEMM here). Each typed argument goes
// through FloatInput/FloatOutput (compute/float_views.h): in place where it is FP32.
void CpuDevice::LinearForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t batch,
                              int64_t in, int64_t out, TensorRef y, ScalarType) {
  const FloatInput fx(*this, x, batch * in), fw(*this, w, out * in), fb(*this, b, out);
  const FloatOutput fy(*this, y, batch * out);
  cpu::LinearForward(fx.get(), fw.get(), fb.get(), batch, in, out, fy.get());
}

void CpuDevice::LinearBackward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef dy, int64_t batch,
                               int64_t in, int64_t out, TensorRef dx, float* dw, float* db,
                               ScalarType) {
  const FloatInput fx(*this, x, batch * in), fw(*this, w, out * in), fdy(*this, dy, batch * out);
  const FloatOutput fdx(*this, dx, batch * in);
  cpu::LinearBackward(fx.get(), fw.get(), fdy.get(), batch, in, out, fdx.get(), dw, db);
}

void CpuDevice::ActivationForward(v1::Activation act, ConstTensorRef x, size_t n, TensorRef y) {
  const FloatInput fx(*this, x, n);
  const FloatOutput fy(*this, y, n);
  cpu::ActivationForward(act, fx.get(), n, fy.get());
}

void CpuDevice::ActivationBackward(v1::Activation act, ConstTensorRef x, ConstTensorRef dy,
                                   size_t n, TensorRef dx) {
  const FloatInput fx(*this, x, n), fdy(*this, dy, n);
  const FloatOutput fdx(*this, dx, n);
  cpu::ActivationBackward(act, fx.get(), fdy.get(), n, fdx.get());
}

// A 16-bit table is widened row by row as it is read: its row count is not the call's.
void CpuDevice::EmbeddingForward(ConstTensorRef table, const int64_t* ids, int64_t n, int64_t dim,
                                 TensorRef out) {
  const FloatOutput fout(*this, out, n * dim);
  if (table.is_float()) {
    cpu::EmbeddingForward(table.f32(), ids, n, dim, fout.get());
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    cpu::Widen(table.type(), (table + ids[i] * dim).u16(), fout.get() + i * dim, dim);
  }
}

void CpuDevice::EmbeddingBackward(const int64_t* ids, ConstTensorRef dout, int64_t n, int64_t dim,
                                  float* dtable) {
  const FloatInput fdout(*this, dout, n * dim);
  cpu::EmbeddingBackward(ids, fdout.get(), n, dim, dtable);
}

void CpuDevice::LayerNormForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t rows,
                                 int64_t dim, float eps, TensorRef y, float* mean, float* rstd) {
  const FloatInput fx(*this, x, rows * dim), fw(*this, w, dim), fb(*this, b, dim);
  const FloatOutput fy(*this, y, rows * dim);
  cpu::LayerNormForward(fx.get(), fw.get(), fb.get(), rows, dim, eps, fy.get(), mean, rstd);
}

void CpuDevice::LayerNormBackward(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                  const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                                  TensorRef dx, float* dw, float* db) {
  const FloatInput fx(*this, x, rows * dim), fw(*this, w, dim), fdy(*this, dy, rows * dim);
  const FloatOutput fdx(*this, dx, rows * dim);
  cpu::LayerNormBackward(fx.get(), fw.get(), mean, rstd, fdy.get(), rows, dim, fdx.get(), dw, db);
}

void CpuDevice::RmsNormForward(ConstTensorRef x, ConstTensorRef w, int64_t rows, int64_t dim,
                               float eps, TensorRef y, float* rstd) {
  const FloatInput fx(*this, x, rows * dim), fw(*this, w, dim);
  const FloatOutput fy(*this, y, rows * dim);
  cpu::RmsNormForward(fx.get(), fw.get(), rows, dim, eps, fy.get(), rstd);
}

void CpuDevice::RmsNormBackward(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                                ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dx,
                                float* dw) {
  const FloatInput fx(*this, x, rows * dim), fw(*this, w, dim), fdy(*this, dy, rows * dim);
  const FloatOutput fdx(*this, dx, rows * dim);
  cpu::RmsNormBackward(fx.get(), fw.get(), rstd, fdy.get(), rows, dim, fdx.get(), dw);
}

void CpuDevice::Rotary(TensorRef x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                       int64_t heads, int64_t head_dim, bool inverse) {
  const FloatOutput fx(*this, x, rows * heads * head_dim, /*read_first=*/true);
  cpu::Rotary(fx.get(), cos, sin, rows, seq, heads, head_dim, inverse);
}

void CpuDevice::PackGroupedQkv(ConstTensorRef q, ConstTensorRef k, ConstTensorRef v, int64_t rows,
                               int64_t heads, int64_t kv_heads, int64_t head_dim, TensorRef qkv) {
  const FloatInput fq(*this, q, rows * heads * head_dim), fk(*this, k, rows * kv_heads * head_dim),
      fv(*this, v, rows * kv_heads * head_dim);
  const FloatOutput fqkv(*this, qkv, rows * 3 * heads * head_dim);
  cpu::PackGroupedQkv(fq.get(), fk.get(), fv.get(), rows, heads, kv_heads, head_dim, fqkv.get());
}

void CpuDevice::UnpackGroupedQkvGrad(ConstTensorRef dqkv, int64_t rows, int64_t heads,
                                     int64_t kv_heads, int64_t head_dim, TensorRef dq, TensorRef dk,
                                     TensorRef dv) {
  const FloatInput fdqkv(*this, dqkv, rows * 3 * heads * head_dim);
  const FloatOutput fdq(*this, dq, rows * heads * head_dim),
      fdk(*this, dk, rows * kv_heads * head_dim), fdv(*this, dv, rows * kv_heads * head_dim);
  cpu::UnpackGroupedQkvGrad(fdqkv.get(), rows, heads, kv_heads, head_dim, fdq.get(), fdk.get(),
                            fdv.get());
}

// As for the GEMMs: operands already hold values of their type; the CPU computes in FP32.
void CpuDevice::AttentionForward(ConstTensorRef qkv, const AttentionShape& s, TensorRef out,
                                 float* probs, ScalarType) {
  const int64_t rows = s.batch * s.seq;
  const FloatInput fqkv(*this, qkv, rows * 3 * s.width());
  const FloatOutput fout(*this, out, rows * s.width());
  cpu::AttentionForward(fqkv.get(), s.batch, s.seq, s.heads, s.head_dim, fout.get(), probs);
}

void CpuDevice::AttentionBackward(ConstTensorRef qkv, const float* probs, ConstTensorRef dout,
                                  const AttentionShape& s, TensorRef dqkv, ScalarType) {
  const int64_t rows = s.batch * s.seq;
  const FloatInput fqkv(*this, qkv, rows * 3 * s.width()), fdout(*this, dout, rows * s.width());
  const FloatOutput fdqkv(*this, dqkv, rows * 3 * s.width());
  cpu::AttentionBackward(fqkv.get(), probs, fdout.get(), s.batch, s.seq, s.heads, s.head_dim,
                         fdqkv.get());
}

void CpuDevice::FusedAttentionForward(const QkvSpan<ConstTensorRef>& qkv,
                                      const AttentionShape& shape, TensorRef out, float* lse,
                                      ScalarType) {
  const FloatQkvInput fqkv(*this, qkv, shape);
  const FloatOutput fout(*this, out, shape.batch * shape.seq * shape.width());
  cpu::FusedAttentionForward(fqkv.span(), shape, fout.get(), lse);
}

void CpuDevice::FusedAttentionBackward(const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                       const float* lse, ConstTensorRef dout,
                                       const AttentionShape& shape, const QkvSpan<TensorRef>& dqkv,
                                       ScalarType) {
  const int64_t rows = shape.batch * shape.seq;
  const FloatQkvInput fqkv(*this, qkv, shape);
  const FloatInput fout(*this, out, rows * shape.width()), fdout(*this, dout, rows * shape.width());
  const FloatQkvOutput fdqkv(*this, dqkv, shape);
  Buffer dots(allocator_, shape.batch * shape.heads * shape.seq, MemoryCategory::kActivations,
              false);
  cpu::FusedAttentionBackward(fqkv.span(), fout.get(), lse, fdout.get(), shape, dots.data(),
                              fdqkv.span());
}

void CpuDevice::CrossEntropy(ConstTensorRef logits, const int64_t* labels, int64_t batch,
                             int64_t classes, float scale, TensorRef dlogits, double* loss) {
  const FloatInput flogits(*this, logits, batch * classes);
  const FloatOutput fdlogits(*this, dlogits, batch * classes);
  *loss = cpu::CrossEntropy(flogits.get(), labels, batch, classes, scale, fdlogits.get());
}

void CpuDevice::MeanSquaredError(ConstTensorRef pred, ConstTensorRef target, int64_t batch,
                                 int64_t out, float scale, TensorRef dpred, double* loss) {
  const FloatInput fpred(*this, pred, batch * out), ftarget(*this, target, batch * out);
  const FloatOutput fdpred(*this, dpred, batch * out);
  *loss = cpu::MeanSquaredError(fpred.get(), ftarget.get(), batch, out, scale, fdpred.get());
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
