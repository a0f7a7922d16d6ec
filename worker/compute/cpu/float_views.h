#ifndef SHARDWISE_WORKER_COMPUTE_CPU_FLOAT_VIEWS_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_FLOAT_VIEWS_H_

// The CPU's layers compute in FP32 on float arrays (cpu/); these adapt the Device's typed
// arguments (runtime/tensor_ref.h) to them. An FP32 reference is used in place, as it
// always was; a 16-bit one (a CpuDevice that stores in the job's param_dtype) is widened
// into a scratch copy on the way in, and an output is narrowed into its reference on the
// way out, rounding to nearest even: the same value FP32 storage rounds in place
// (compute/casts.h), so both storages give a job the same bits (cpu_device_test).
//
// The scratch copies are the CPU's own, outside the Device's allocator: 16-bit storage
// on the CPU exists to check that the runtime's typed buffers give the same results, not
// to save memory there.
//
// Thread-safety: none; each lives in one operation.

#include <cstddef>
#include <vector>

#include "worker/compute/attention_shape.h"
#include "worker/compute/casts.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cpu {

// An input's n elements as FP32.
class FloatInput {
 public:
  FloatInput(ConstTensorRef ref, size_t n) {
    if (ref.null() || ref.is_float()) {
      data_ = ref.null() ? nullptr : ref.f32();
      return;
    }
    widened_.resize(n);
    Widen(ref.type(), ref.u16(), widened_.data(), n);
    data_ = widened_.data();
  }
  FloatInput(const FloatInput&) = delete;
  FloatInput& operator=(const FloatInput&) = delete;

  const float* get() const { return data_; }

 private:
  std::vector<float> widened_;
  const float* data_ = nullptr;
};

// Room for an output's n elements as FP32, narrowed into the reference when this goes
// out of scope (after the operation that wrote it). `read_first`: the operation also
// reads the output's values (in place, or adding to them).
class FloatOutput {
 public:
  FloatOutput(TensorRef ref, size_t n, bool read_first = false) : ref_(ref), n_(n) {
    if (ref.null() || ref.is_float()) {
      data_ = ref.null() ? nullptr : ref.f32();
      return;
    }
    scratch_.resize(n);
    if (read_first) Widen(ref.type(), ref.u16(), scratch_.data(), n);
    data_ = scratch_.data();
  }
  ~FloatOutput() {
    if (!scratch_.empty()) Narrow(ref_.type(), scratch_.data(), ref_.u16(), n_);
  }
  FloatOutput(const FloatOutput&) = delete;
  FloatOutput& operator=(const FloatOutput&) = delete;

  float* get() const { return data_; }

 private:
  TensorRef ref_;
  size_t n_;
  std::vector<float> scratch_;
  float* data_ = nullptr;
};

// q, k and v (attention_shape.h) as FP32 in their layout: packed, the [rows, 3 * width]
// block in one piece; apart, each of the three. Inputs (FloatQkvInput) or gradients
// (FloatQkvOutput, narrowed into their references when it goes out of scope).
template <typename Ref, typename Piece, typename Ptr>
class FloatQkv {
 public:
  FloatQkv(const QkvSpan<Ref>& qkv, const AttentionShape& shape)
      : q_(qkv.q, Rows(shape) * qkv.q_stride),
        k_(qkv.packed ? nullptr : qkv.k, Rows(shape) * qkv.kv_stride),
        v_(qkv.packed ? nullptr : qkv.v, Rows(shape) * qkv.kv_stride),
        span_(qkv.packed ? PackedQkvSpan(q_.get(), shape)
                         : SeparateQkvSpan(q_.get(), k_.get(), v_.get(), shape, qkv.kv_heads)) {}

  const QkvSpan<Ptr>& span() const { return span_; }

 private:
  static size_t Rows(const AttentionShape& shape) { return shape.batch * shape.seq; }
  Piece q_, k_, v_;
  QkvSpan<Ptr> span_;
};

using FloatQkvInput = FloatQkv<ConstTensorRef, FloatInput, const float*>;
using FloatQkvOutput = FloatQkv<TensorRef, FloatOutput, float*>;

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_FLOAT_VIEWS_H_
