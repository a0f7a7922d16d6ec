#include "worker/compute/cpu/cpu_device.h"

#include <cmath>
#include <cstring>

#include "worker/compute/casts.h"
#include "worker/compute/cpu/activation.h"
#include "worker/compute/cpu/attention.h"
#include "worker/compute/cpu/embedding.h"
#include "worker/compute/cpu/float_views.h"
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

void CpuDevice::Accumulate(TensorRef dst, ConstTensorRef src, size_t n) {
  const cpu::FloatInput from(src, n);
  const cpu::FloatOutput to(dst, n, /*read_first=*/true);
  AccumulateF(to.get(), from.get(), n);
}

void CpuDevice::MultiplyElementwise(ConstTensorRef a, ConstTensorRef b, size_t n, TensorRef out) {
  const cpu::FloatInput fa(a, n), fb(b, n);
  const cpu::FloatOutput result(out, n);
  MultiplyElementwiseF(fa.get(), fb.get(), n, result.get());
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
// multiplies them in FP32 (the CPU has no BF16/FP16 GEMM here). Each typed argument goes
// through cpu::FloatInput/FloatOutput (float_views.h): in place where it is FP32.
void CpuDevice::LinearForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t batch,
                              int64_t in, int64_t out, TensorRef y, ScalarType) {
  const cpu::FloatInput fx(x, batch * in), fw(w, out * in), fb(b, out);
  const cpu::FloatOutput fy(y, batch * out);
  cpu::LinearForward(fx.get(), fw.get(), fb.get(), batch, in, out, fy.get());
}

void CpuDevice::LinearBackward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef dy, int64_t batch,
                               int64_t in, int64_t out, TensorRef dx, float* dw, float* db,
                               ScalarType) {
  const cpu::FloatInput fx(x, batch * in), fw(w, out * in), fdy(dy, batch * out);
  const cpu::FloatOutput fdx(dx, batch * in);
  cpu::LinearBackward(fx.get(), fw.get(), fdy.get(), batch, in, out, fdx.get(), dw, db);
}

void CpuDevice::ActivationForward(v1::Activation act, ConstTensorRef x, size_t n, TensorRef y) {
  const cpu::FloatInput fx(x, n);
  const cpu::FloatOutput fy(y, n);
  cpu::ActivationForward(act, fx.get(), n, fy.get());
}

void CpuDevice::ActivationBackward(v1::Activation act, ConstTensorRef x, ConstTensorRef dy,
                                   size_t n, TensorRef dx) {
  const cpu::FloatInput fx(x, n), fdy(dy, n);
  const cpu::FloatOutput fdx(dx, n);
  cpu::ActivationBackward(act, fx.get(), fdy.get(), n, fdx.get());
}

// A 16-bit table is widened row by row as it is read: its row count is not the call's.
void CpuDevice::EmbeddingForward(ConstTensorRef table, const int64_t* ids, int64_t n, int64_t dim,
                                 TensorRef out) {
  const cpu::FloatOutput fout(out, n * dim);
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
  const cpu::FloatInput fdout(dout, n * dim);
  cpu::EmbeddingBackward(ids, fdout.get(), n, dim, dtable);
}

void CpuDevice::LayerNormForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t rows,
                                 int64_t dim, float eps, TensorRef y, float* mean, float* rstd) {
  const cpu::FloatInput fx(x, rows * dim), fw(w, dim), fb(b, dim);
  const cpu::FloatOutput fy(y, rows * dim);
  cpu::LayerNormForward(fx.get(), fw.get(), fb.get(), rows, dim, eps, fy.get(), mean, rstd);
}

void CpuDevice::LayerNormBackward(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                  const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                                  TensorRef dx, float* dw, float* db) {
  const cpu::FloatInput fx(x, rows * dim), fw(w, dim), fdy(dy, rows * dim);
  const cpu::FloatOutput fdx(dx, rows * dim);
  cpu::LayerNormBackward(fx.get(), fw.get(), mean, rstd, fdy.get(), rows, dim, fdx.get(), dw, db);
}

void CpuDevice::RmsNormForward(ConstTensorRef x, ConstTensorRef w, int64_t rows, int64_t dim,
                               float eps, TensorRef y, float* rstd) {
  const cpu::FloatInput fx(x, rows * dim), fw(w, dim);
  const cpu::FloatOutput fy(y, rows * dim);
  cpu::RmsNormForward(fx.get(), fw.get(), rows, dim, eps, fy.get(), rstd);
}

void CpuDevice::RmsNormBackward(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                                ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dx,
                                float* dw) {
  const cpu::FloatInput fx(x, rows * dim), fw(w, dim), fdy(dy, rows * dim);
  const cpu::FloatOutput fdx(dx, rows * dim);
  cpu::RmsNormBackward(fx.get(), fw.get(), rstd, fdy.get(), rows, dim, fdx.get(), dw);
}

void CpuDevice::Rotary(TensorRef x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                       int64_t heads, int64_t head_dim, bool inverse) {
  const cpu::FloatOutput fx(x, rows * heads * head_dim, /*read_first=*/true);
  cpu::Rotary(fx.get(), cos, sin, rows, seq, heads, head_dim, inverse);
}

void CpuDevice::PackGroupedQkv(ConstTensorRef q, ConstTensorRef k, ConstTensorRef v, int64_t rows,
                               int64_t heads, int64_t kv_heads, int64_t head_dim, TensorRef qkv) {
  const cpu::FloatInput fq(q, rows * heads * head_dim), fk(k, rows * kv_heads * head_dim),
      fv(v, rows * kv_heads * head_dim);
  const cpu::FloatOutput fqkv(qkv, rows * 3 * heads * head_dim);
  cpu::PackGroupedQkv(fq.get(), fk.get(), fv.get(), rows, heads, kv_heads, head_dim, fqkv.get());
}

void CpuDevice::UnpackGroupedQkvGrad(ConstTensorRef dqkv, int64_t rows, int64_t heads,
                                     int64_t kv_heads, int64_t head_dim, TensorRef dq, TensorRef dk,
                                     TensorRef dv) {
  const cpu::FloatInput fdqkv(dqkv, rows * 3 * heads * head_dim);
  const cpu::FloatOutput fdq(dq, rows * heads * head_dim), fdk(dk, rows * kv_heads * head_dim),
      fdv(dv, rows * kv_heads * head_dim);
  cpu::UnpackGroupedQkvGrad(fdqkv.get(), rows, heads, kv_heads, head_dim, fdq.get(), fdk.get(),
                            fdv.get());
}

// As for the GEMMs: operands already hold values of their type; the CPU computes in FP32.
void CpuDevice::AttentionForward(ConstTensorRef qkv, const AttentionShape& s, TensorRef out,
                                 float* probs, ScalarType) {
  const int64_t rows = s.batch * s.seq;
  const cpu::FloatInput fqkv(qkv, rows * 3 * s.width());
  const cpu::FloatOutput fout(out, rows * s.width());
  cpu::AttentionForward(fqkv.get(), s.batch, s.seq, s.heads, s.head_dim, fout.get(), probs);
}

void CpuDevice::AttentionBackward(ConstTensorRef qkv, const float* probs, ConstTensorRef dout,
                                  const AttentionShape& s, TensorRef dqkv, ScalarType) {
  const int64_t rows = s.batch * s.seq;
  const cpu::FloatInput fqkv(qkv, rows * 3 * s.width()), fdout(dout, rows * s.width());
  const cpu::FloatOutput fdqkv(dqkv, rows * 3 * s.width());
  cpu::AttentionBackward(fqkv.get(), probs, fdout.get(), s.batch, s.seq, s.heads, s.head_dim,
                         fdqkv.get());
}

void CpuDevice::FusedAttentionForward(const QkvSpan<ConstTensorRef>& qkv,
                                      const AttentionShape& shape, TensorRef out, float* lse,
                                      ScalarType) {
  const cpu::FloatQkvInput fqkv(qkv, shape);
  const cpu::FloatOutput fout(out, shape.batch * shape.seq * shape.width());
  cpu::FusedAttentionForward(fqkv.span(), shape, fout.get(), lse);
}

void CpuDevice::FusedAttentionBackward(const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                       const float* lse, ConstTensorRef dout,
                                       const AttentionShape& shape, const QkvSpan<TensorRef>& dqkv,
                                       ScalarType) {
  const int64_t rows = shape.batch * shape.seq;
  const cpu::FloatQkvInput fqkv(qkv, shape);
  const cpu::FloatInput fout(out, rows * shape.width()), fdout(dout, rows * shape.width());
  const cpu::FloatQkvOutput fdqkv(dqkv, shape);
  Buffer dots(allocator_, shape.batch * shape.heads * shape.seq, MemoryCategory::kActivations,
              false);
  cpu::FusedAttentionBackward(fqkv.span(), fout.get(), lse, fdout.get(), shape, dots.data(),
                              fdqkv.span());
}

void CpuDevice::CrossEntropy(ConstTensorRef logits, const int64_t* labels, int64_t batch,
                             int64_t classes, float scale, TensorRef dlogits, double* loss) {
  const cpu::FloatInput flogits(logits, batch * classes);
  const cpu::FloatOutput fdlogits(dlogits, batch * classes);
  *loss = cpu::CrossEntropy(flogits.get(), labels, batch, classes, scale, fdlogits.get());
}

void CpuDevice::MeanSquaredError(ConstTensorRef pred, ConstTensorRef target, int64_t batch,
                                 int64_t out, float scale, TensorRef dpred, double* loss) {
  const cpu::FloatInput fpred(pred, batch * out), ftarget(target, batch * out);
  const cpu::FloatOutput fdpred(dpred, batch * out);
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
