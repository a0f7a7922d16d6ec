// CudaDevice's own bookkeeping: which stream a thread is bound to, and the synchronous
// debugging mode (its switch is read without a GPU).

#include "worker/cuda/cuda_device.h"

#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"

namespace shardwise::cuda {
namespace {

using ::shardwise::cuda::testing::DeviceVector;

TEST(CudaDeviceSynchronousMode, IsOnWhenTheVariableIsOne) {
  ::unsetenv(kSynchronousModeVariable);
  EXPECT_FALSE(SynchronousModeRequested());
  ::setenv(kSynchronousModeVariable, "0", 1);
  EXPECT_FALSE(SynchronousModeRequested());
  ::setenv(kSynchronousModeVariable, "1", 1);
  EXPECT_TRUE(SynchronousModeRequested());
  ::unsetenv(kSynchronousModeVariable);
}

// A synchronous device's operations complete before they return: the stream is idle
// right after the call. (It passes without the mode too if the kernel happens to finish
// before the query; 256 MiB keeps it running for a while, so it fails then in practice.)
TEST(CudaDeviceSynchronousMode, EachOperationHasFinishedWhenItReturns) {
  SKIP_WITHOUT_GPU();
  CudaDeviceOptions options;
  options.synchronous = true;
  auto device = CudaDevice::Create(options);
  ASSERT_TRUE(device.ok()) << device.status();
  // Large enough (256 MiB) that without the mode the kernel would still run at the query.
  constexpr size_t kN = size_t{1} << 26;
  DeviceVector<float> data(std::vector<float>(kN, 1.0f));
  (*device)->Multiply(data.get(), kN, 3.0f);
  EXPECT_EQ(cudaStreamQuery((*device)->compute_stream()), cudaSuccess);
  EXPECT_TRUE((*device)->status().ok()) << (*device)->status();
  EXPECT_EQ(data.ToHost()[kN - 1], 3.0f);
}

// A thread bound to a device that another thread destroyed must not inherit that
// device's stream when a new device is made at the same address.
TEST(CudaDevice, ANewDeviceAtAFreedOnesAddressDoesNotInheritItsStream) {
  SKIP_WITHOUT_GPU();
  auto first = CudaDevice::Create({});
  ASSERT_TRUE(first.ok()) << first.status();
  std::unique_ptr<CudaDevice> old = std::move(*first);
  old->UseCommunicationStream(Device::CommLane::kUnshard);  // this thread: old's unshard
  ASSERT_EQ(old->CurrentStream(), old->communication_stream(Device::CommLane::kUnshard));
  const CudaDevice* old_address = old.get();
  std::unique_ptr<CudaDevice> fresh;
  // Freed and made again on one thread, whose allocator hands the same block back.
  std::thread([&] {
    old.reset();
    auto made = CudaDevice::Create({});
    ASSERT_TRUE(made.ok()) << made.status();
    fresh = std::move(*made);
  }).join();
  ASSERT_NE(fresh, nullptr);
  if (fresh.get() != old_address) {
    GTEST_SKIP() << "the new device was made at another address; nothing to check";
  }
  EXPECT_EQ(fresh->CurrentStream(), fresh->compute_stream());
}

// A GEMM from a thread on a communication stream would race the compute stream, which
// cuBLAS's handle is bound to: it is refused with INTERNAL and never issued (y keeps its
// values).
TEST(CudaDevice, AGemmFromACommunicationThreadIsRefusedAndNotRun) {
  SKIP_WITHOUT_GPU();
  auto made = CudaDevice::Create({});
  ASSERT_TRUE(made.ok()) << made.status();
  CudaDevice& device = **made;
  DeviceVector<float> x(std::vector<float>(4, 1.0f)), w(std::vector<float>(4, 2.0f)),
      y(std::vector<float>(4, -1.0f));
  std::thread([&] {
    device.UseCommunicationStream(Device::CommLane::kReduction);
    device.LinearForward(x.get(), w.get(), nullptr, 2, 2, 2, y.get(), ScalarType::kFloat32);
    device.Synchronize().IgnoreError();
  }).join();
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInternal) << device.status();
  EXPECT_EQ(y.ToHost(), std::vector<float>(4, -1.0f)) << "the refused GEMM ran";
}

}  // namespace
}  // namespace shardwise::cuda
