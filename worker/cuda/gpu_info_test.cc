#include "worker/cuda/gpu_info.h"

#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"

namespace shardwise::cuda {
namespace {

TEST(GpuInfoTest, DescribesTheGpuAndRefusesAMissingOne) {
  SKIP_WITHOUT_GPU();
  auto info = QueryGpu(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->name().empty());
  EXPECT_GT(info->memory_bytes(), int64_t{1} << 30);
  EXPECT_GE(info->compute_capability_major(), 7);
  EXPECT_NE(info->driver_version(), "0.0");
  EXPECT_NE(info->nccl_version(), "0.0.0");
  // The worker links cuDNN 9 (FUSED attention runs through it).
  EXPECT_EQ(info->cudnn_version().substr(0, 2), "9.") << info->cudnn_version();
  std::printf("GPU 0: %s\n", info->DebugString().c_str());

  auto free = FreeGpuMemory(0);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_GT(*free, 0);
  EXPECT_LE(*free, info->memory_bytes());

  auto missing = QueryGpu(64);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("--gpu=64"), std::string::npos) << missing.status();
}

}  // namespace
}  // namespace shardwise::cuda
