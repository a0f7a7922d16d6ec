#ifndef SHARDWISE_WORKER_CUDA_CUDA_DEVICE_FIXTURE_H_
#define SHARDWISE_WORKER_CUDA_CUDA_DEVICE_FIXTURE_H_

// A test fixture with a CudaDevice on GPU 0: skipped (never passed) without a GPU; the
// device's queued work is waited for, and its sticky error checked, after each test.

#include <memory>

#include "gtest/gtest.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/gpu_test_support.h"

namespace shardwise::cuda::testing {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    auto device = CudaDevice::Create({});
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
  }
  void TearDown() override {
    if (device_ != nullptr) {
      EXPECT_TRUE(device_->Synchronize().ok()) << device_->status();
    }
  }

  std::unique_ptr<CudaDevice> device_;
};

}  // namespace shardwise::cuda::testing

#endif  // SHARDWISE_WORKER_CUDA_CUDA_DEVICE_FIXTURE_H_
