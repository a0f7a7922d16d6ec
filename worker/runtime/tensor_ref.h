#ifndef SHARDWISE_WORKER_RUNTIME_TENSOR_REF_H_
#define SHARDWISE_WORKER_RUNTIME_TENSOR_REF_H_

// A pointer to a device's elements that carries their type: how the Device interface
// (compute/device.h) takes the values a model stores, activations and unsharded
// parameters, which a device may keep in FP32 or in the job's 16-bit param_dtype
// (Device::StorageType). The shapes come with each operation, so a reference holds no
// size. A `const float*` converts implicitly (FP32 storage: the CPU's, and every caller
// written before the types), so does nullptr (an absent optional argument); 16-bit
// storage is named with its type, since FP16 and BF16 share uint16_t.
//
// Thread-safety: a value type; what it points at is the caller's to order.

#include <cassert>
#include <cstddef>
#include <cstdint>

#include "worker/runtime/scalar_type.h"

namespace shardwise {

class ConstTensorRef {
 public:
  constexpr ConstTensorRef() = default;
  constexpr ConstTensorRef(std::nullptr_t) {}  // NOLINT: absent, as a null pointer is
  constexpr ConstTensorRef(const float* data)  // NOLINT: FP32 values convert implicitly
      : data_(data) {}
  constexpr ConstTensorRef(const void* data, ScalarType type) : data_(data), type_(type) {}

  const void* data() const { return data_; }
  ScalarType type() const { return type_; }
  bool null() const { return data_ == nullptr; }
  bool is_float() const { return type_ == ScalarType::kFloat32; }
  // The elements as FP32 (they must be), or as a 16-bit type's storage (they must be one).
  const float* f32() const {
    assert(is_float());
    return static_cast<const float*>(data_);
  }
  const uint16_t* u16() const {
    assert(ElementSize(type_) == 2);
    return static_cast<const uint16_t*>(data_);
  }
  // `elements` further on (a row, a head, a parameter in its unit).
  ConstTensorRef operator+(int64_t elements) const {
    if (data_ == nullptr) return *this;
    return {static_cast<const char*>(data_) + elements * static_cast<int64_t>(ElementSize(type_)),
            type_};
  }

 private:
  const void* data_ = nullptr;
  ScalarType type_ = ScalarType::kFloat32;
};

class TensorRef {
 public:
  constexpr TensorRef() = default;
  constexpr TensorRef(std::nullptr_t) {}  // NOLINT: absent, as a null pointer is
  constexpr TensorRef(float* data)        // NOLINT: FP32 values convert implicitly
      : data_(data) {}
  constexpr TensorRef(void* data, ScalarType type) : data_(data), type_(type) {}

  void* data() const { return data_; }
  ScalarType type() const { return type_; }
  bool null() const { return data_ == nullptr; }
  bool is_float() const { return type_ == ScalarType::kFloat32; }
  float* f32() const {
    assert(is_float());
    return static_cast<float*>(data_);
  }
  uint16_t* u16() const {
    assert(ElementSize(type_) == 2);
    return static_cast<uint16_t*>(data_);
  }
  TensorRef operator+(int64_t elements) const {
    if (data_ == nullptr) return *this;
    return {static_cast<char*>(data_) + elements * static_cast<int64_t>(ElementSize(type_)), type_};
  }
  operator ConstTensorRef() const { return {data_, type_}; }  // NOLINT: read-only use

 private:
  void* data_ = nullptr;
  ScalarType type_ = ScalarType::kFloat32;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_TENSOR_REF_H_
