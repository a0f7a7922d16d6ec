#include "worker/daemon/memory_check.h"

#include <fstream>
#include <string>

#include "common/testing/scratch.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/memory_estimate.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::JobSpec Spec() {
  v1::JobSpec spec;
  for (int w : {1024, 1024, 10}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(1e-3);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(1000);
  spec.set_global_batch_size(64);
  spec.set_steps(1);
  spec.set_world_size(2);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

TEST(CheckRankMemory, RefusesWhatDoesNotFitNamingTheRankAndTheSizes) {
  const v1::JobSpec spec = Spec();
  const int64_t needed = EstimateRankMemory(spec)->total();
  EXPECT_TRUE(CheckRankMemory(spec, 1, needed, 0).ok());
  const absl::Status refused = CheckRankMemory(spec, 1, needed - 1, 0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("rank 1 needs about "), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("(parameters "), std::string::npos) << refused;
  EXPECT_NE(refused.message().find(" of host memory available"), std::string::npos) << refused;

  v1::JobSpec gpu = spec;
  gpu.set_device(v1::CUDA);
  EXPECT_NE(CheckRankMemory(gpu, 0, 1, 0).message().find("free on its GPU"), std::string::npos);
}

TEST(CheckRankMemory, CountsTheDataFile) {
  v1::JobSpec spec = Spec();
  spec.mutable_data()->set_safetensors_path("/nonexistent.safetensors");
  const int64_t needed = EstimateRankMemory(spec)->total();
  EXPECT_TRUE(CheckRankMemory(spec, 0, needed, 0).ok());
  EXPECT_FALSE(CheckRankMemory(spec, 0, needed, int64_t{1} << 20).ok());
}

TEST(DataFileBytes, IsTheSizeOfTheSafetensorsFile) {
  const std::string path = testing::ScratchPath("data.safetensors");
  std::ofstream(path, std::ios::binary) << std::string(4096, 'x');
  v1::JobSpec spec = Spec();
  EXPECT_EQ(DataFileBytes(spec), 0);  // synthetic
  spec.mutable_data()->set_safetensors_path(path);
  EXPECT_EQ(DataFileBytes(spec), 4096);
  spec.mutable_data()->set_safetensors_path(path + ".missing");
  EXPECT_EQ(DataFileBytes(spec), 0);
}

}  // namespace
}  // namespace shardwise
