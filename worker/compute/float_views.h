#ifndef SHARDWISE_WORKER_COMPUTE_FLOAT_VIEWS_H_
#define SHARDWISE_WORKER_COMPUTE_FLOAT_VIEWS_H_

// A device's FP32 kernels take float arrays; these adapt the Device's typed arguments
// (runtime/tensor_ref.h) to them. An FP32 reference is used in place, as it always was; a
// 16-bit one (a device that stores in the job's param_dtype, Device::StorageType) is
// widened into a buffer from the device's allocator on the way in, and an output is
// narrowed into its reference on the way out (the device's Widen and Narrow, on the
// calling thread's stream), rounding to nearest even: the value FP32 storage rounds in
// place, so both storages give a job the same values. The CPU device runs every layer
// through them; the CUDA device those whose kernels do not yet read and write 16-bit
// storage themselves (each an extra pass over its values: issue 47's kernels remove them).
//
// Thread-safety: none; each lives in one operation, on the thread that issues it.

#include <cstddef>

#include "worker/compute/attention_shape.h"
#include "worker/compute/device.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise {

// An input's n elements as FP32.
class FloatInput {
 public:
  FloatInput(Device& device, ConstTensorRef ref, size_t n) {
    if (ref.null() || ref.is_float()) {
      data_ = ref.null() ? nullptr : ref.f32();
      return;
    }
    widened_ = Buffer(device.allocator(), n, MemoryCategory::kActivations, /*zero=*/false);
    device.Widen(ref.type(), ref.u16(), widened_.data(), n);
    data_ = widened_.data();
  }
  FloatInput(const FloatInput&) = delete;
  FloatInput& operator=(const FloatInput&) = delete;

  const float* get() const { return data_; }

 private:
  Buffer widened_;
  const float* data_ = nullptr;
};

// Room for an output's n elements as FP32, narrowed into the reference when this goes
// out of scope (after the operation that wrote it was issued). `read_first`: the
// operation also reads the output's values (in place, or adding to them).
class FloatOutput {
 public:
  FloatOutput(Device& device, TensorRef ref, size_t n, bool read_first = false)
      : device_(&device), ref_(ref), n_(n) {
    if (ref.null() || ref.is_float()) {
      data_ = ref.null() ? nullptr : ref.f32();
      return;
    }
    scratch_ = Buffer(device.allocator(), n, MemoryCategory::kActivations, /*zero=*/false);
    if (read_first) device.Widen(ref.type(), ref.u16(), scratch_.data(), n);
    data_ = scratch_.data();
  }
  ~FloatOutput() {
    if (!scratch_.empty()) device_->Narrow(ref_.type(), scratch_.data(), ref_.u16(), n_);
  }
  FloatOutput(const FloatOutput&) = delete;
  FloatOutput& operator=(const FloatOutput&) = delete;

  float* get() const { return data_; }

 private:
  Device* device_;
  TensorRef ref_;
  size_t n_;
  Buffer scratch_;
  float* data_ = nullptr;
};

// q, k and v (attention_shape.h) as FP32 in their layout: packed, the [rows, 3 * width]
// block in one piece; apart, each of the three. Inputs (FloatQkvInput) or gradients
// (FloatQkvOutput, narrowed into their references when it goes out of scope).
template <typename Ref, typename Piece, typename Ptr>
class FloatQkv {
 public:
  FloatQkv(Device& device, const QkvSpan<Ref>& qkv, const AttentionShape& shape)
      : q_(device, qkv.q, Rows(shape) * qkv.q_stride),
        k_(device, qkv.packed ? nullptr : qkv.k, Rows(shape) * qkv.kv_stride),
        v_(device, qkv.packed ? nullptr : qkv.v, Rows(shape) * qkv.kv_stride),
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

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_FLOAT_VIEWS_H_
