// ShardedGradScaler's state machine: initial scale, growth after the interval of clean
// steps, backoff (and a reset tracker) on an overflow, the inverse in FP64.

#include "worker/fsdp/grad_scaler.h"

#include "gtest/gtest.h"

namespace shardwise::fsdp {
namespace {

TEST(GradScaler, DisabledScalesByOne) {
  GradScaler scaler(v1::GradScaler{});
  EXPECT_FALSE(scaler.enabled());
  EXPECT_EQ(scaler.scale(), 1.0f);
  scaler.Update(true);
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

TEST(GradScaler, PyTorchDefaults) {
  v1::GradScaler spec;
  spec.set_enabled(true);
  GradScaler scaler(spec);
  EXPECT_EQ(scaler.scale(), 65536.0f);
  for (int i = 0; i < 1999; ++i) scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.growth_tracker(), 1999);
  scaler.Update(false);  // the 2000th clean step
  EXPECT_EQ(scaler.scale(), 131072.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  scaler.Update(false);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(GradScaler, InverseIsComputedInFp64) {
  v1::GradScaler spec;
  spec.set_enabled(true);
  spec.set_init_scale(3.0);
  spec.set_growth_interval(1);
  spec.set_growth_factor(3.0);
  GradScaler scaler(spec);
  EXPECT_EQ(scaler.inverse_scale(), static_cast<float>(1.0 / 3.0));
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 9.0f);
  EXPECT_EQ(scaler.inverse_scale(), static_cast<float>(1.0 / 9.0));
}

// A growth past FP32's largest value leaves the scale as it was (else every later step
// would scale the loss by infinity and be skipped); the tracker starts again.
TEST(GradScaler, AGrowthThatWouldOverflowLeavesTheScale) {
  v1::GradScaler spec;
  spec.set_enabled(true);
  spec.set_init_scale(1.7014118346046923e38);  // 2^127
  spec.set_growth_interval(1);
  GradScaler scaler(spec);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 1.7014118346046923e38f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

// Each update multiplies in FP64 and rounds once, as torch's kernel (a float scale times
// a double factor): with a factor FP32 cannot hold, a float product drifts from it.
TEST(GradScaler, UpdatesMultiplyByTheFactorInFp64) {
  v1::GradScaler spec;
  spec.set_enabled(true);
  spec.set_backoff_factor(0.9);
  GradScaler scaler(spec);
  scaler.Update(true);
  scaler.Update(true);
  const float once = static_cast<float>(65536.0f * 0.9);
  EXPECT_EQ(scaler.scale(), static_cast<float>(once * 0.9));
  EXPECT_NE(scaler.scale(), 65536.0f * 0.9f * 0.9f);
}

}  // namespace
}  // namespace shardwise::fsdp
