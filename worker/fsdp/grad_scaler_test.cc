// ShardedGradScaler's state machine: initial scale, growth after the interval of clean
// steps, backoff (and a reset tracker) on an overflow, the inverse in FP64.

#include "worker/fsdp/grad_scaler.h"

#include <cmath>

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

// A resumed attempt takes the checkpoint's state; a state no scaler could have written (a
// damaged manifest) is DATA_LOSS, where a NaN scale would skip every step after it.
TEST(GradScaler, RestoresAStateAndRefusesOneNoScalerWrote) {
  v1::GradScaler spec;
  spec.set_enabled(true);
  GradScaler scaler(spec);
  v1::GradScalerState state;
  state.set_scale(1024);
  state.set_skipped_steps(3);
  state.set_growth_tracker(7);
  ASSERT_TRUE(scaler.Restore(state).ok());
  EXPECT_EQ(scaler.scale(), 1024.0f);
  EXPECT_EQ(scaler.skipped_steps(), 3);
  EXPECT_EQ(scaler.growth_tracker(), 7);
  v1::GradScalerState none;
  none.set_scale(0);  // a job that did not scale: nothing to take
  ASSERT_TRUE(scaler.Restore(none).ok());
  EXPECT_EQ(scaler.scale(), 1024.0f);
  for (double bad : {std::nan(""), HUGE_VAL, 1e39}) {
    v1::GradScalerState damaged = state;
    damaged.set_scale(bad);
    const absl::Status restored = scaler.Restore(damaged);
    EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_NE(restored.message().find("grad_scaler.scale is "), std::string::npos) << restored;
  }
  v1::GradScalerState negative = state;
  negative.set_growth_tracker(-1);
  EXPECT_EQ(scaler.Restore(negative).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(scaler.scale(), 1024.0f);  // a refused state changes nothing
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
