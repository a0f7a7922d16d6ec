#ifndef SHARDWISE_WORKER_CUDA_GPU_TEST_SUPPORT_H_
#define SHARDWISE_WORKER_CUDA_GPU_TEST_SUPPORT_H_

// For GPU tests: skip (never pass) where there is no GPU, move vectors to and from
// device memory, and compare with the CPU.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/casts.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::cuda::testing {

// Empty when a CUDA GPU is usable; else why not (no driver, no device).
std::string NoGpuReason();

// In a test body or SetUp: reports the test SKIPPED, with the reason, without a GPU.
#define SKIP_WITHOUT_GPU()                                                           \
  do {                                                                               \
    const std::string shardwise_no_gpu_ = ::shardwise::cuda::testing::NoGpuReason(); \
    if (!shardwise_no_gpu_.empty()) GTEST_SKIP() << shardwise_no_gpu_;               \
  } while (false)

// Device memory holding a copy of a host vector (or zeros); freed on destruction. Made
// whole before its constructor returns: the zeroing and the upload run on the legacy
// default stream, which a device's non-blocking streams do not wait for.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(n, 1) * sizeof(T)),
              cudaSuccess);
    EXPECT_EQ(cudaMemset(data_, 0, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  explicit DeviceVector(const std::vector<T>& host) : DeviceVector(host.size()) {
    EXPECT_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;

  T* get() { return data_; }
  size_t size() const { return n_; }
  // Waits for the device, then copies back.
  std::vector<T> ToHost() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
};

// n normal values with standard deviation `scale`, from `seed`.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f);

// RandomFloats rounded to `type`, as its stored elements E: float (FP32 storage) or
// uint16_t (the 16-bit bits).
template <typename E>
std::vector<E> Stored(ScalarType type, size_t n, uint32_t seed, float scale = 1.0f) {
  std::vector<float> values = RandomFloats(n, seed, scale);
  cpu::RoundToPrecision(type, values.data(), values.size());
  if constexpr (std::is_same_v<E, float>) {
    return values;
  } else {
    std::vector<E> bits(n);
    cpu::Narrow(type, values.data(), bits.data(), n);
    return bits;
  }
}

// Stored values (as Stored<E> makes them, or a result read back) as FP32.
template <typename E>
std::vector<float> Widened(ScalarType type, const std::vector<E>& stored) {
  if constexpr (std::is_same_v<E, float>) {
    return stored;
  } else {
    std::vector<float> values(stored.size());
    cpu::Widen(type, stored.data(), values.data(), values.size());
    return values;
  }
}

// Calls check(E{}, type) for each storage a job's values may take, E its stored element:
// FP32 (float), BF16 and FP16 (uint16_t bits), each under a SCOPED_TRACE naming it.
template <typename Check>
void ForEachStorage(const Check& check) {
  {
    SCOPED_TRACE("FP32 storage");
    check(float{}, ScalarType::kFloat32);
  }
  for (const ScalarType type : {ScalarType::kBFloat16, ScalarType::kFloat16}) {
    SCOPED_TRACE(::testing::Message() << ScalarTypeName(type) << " storage");
    check(uint16_t{}, type);
  }
}

// Every |got - want| <= atol + rtol * |want| (the first few misses are reported by index).
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float rtol,
                float atol, const char* what);

}  // namespace shardwise::cuda::testing

#endif  // SHARDWISE_WORKER_CUDA_GPU_TEST_SUPPORT_H_
