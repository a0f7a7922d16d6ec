#include "worker/fsdp/lr_schedule.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace shardwise::fsdp {
namespace {

v1::OptimizerSpec AdamW(double lr, v1::LrSchedule::Decay decay, int64_t warmup, int64_t decay_steps,
                        double min_lr) {
  v1::OptimizerSpec spec;
  spec.mutable_adamw()->set_lr(lr);
  spec.mutable_lr_schedule()->set_decay(decay);
  spec.mutable_lr_schedule()->set_warmup_steps(warmup);
  spec.mutable_lr_schedule()->set_decay_steps(decay_steps);
  spec.mutable_lr_schedule()->set_min_lr(min_lr);
  return spec;
}

TEST(LrSchedule, ConstantWithoutWarmupIsTheOptimizersLrExactly) {
  v1::OptimizerSpec sgd;
  sgd.mutable_sgd()->set_lr(0.1);
  for (int64_t s : {0, 1, 99}) EXPECT_EQ(ScheduledLearningRate(sgd, s, 100), 0.1);
  v1::OptimizerSpec adamw;
  adamw.mutable_adamw();
  EXPECT_EQ(ScheduledLearningRate(adamw, 5, 100), 1e-3);
}

// A warmup as long as int64 holds (allowed with a constant rate) warms up, slowly: the
// rate stays positive, not the wrapped-around warmup + 1's negative.
TEST(LrSchedule, TheLongestWarmupKeepsTheRatePositive) {
  v1::OptimizerSpec sgd;
  sgd.mutable_sgd()->set_lr(0.1);
  sgd.mutable_lr_schedule()->set_warmup_steps(std::numeric_limits<int64_t>::max());
  const double lr = ScheduledLearningRate(sgd, 0, 100);
  EXPECT_GT(lr, 0);
  EXPECT_LT(lr, 1e-19);
}

// nanoGPT's get_lr with learning_rate 6e-4, warmup_iters 10, lr_decay_iters 100,
// min_lr 6e-5, evaluated by hand.
TEST(LrSchedule, WarmupThenCosineAsNanoGpt) {
  const v1::OptimizerSpec spec = AdamW(6e-4, v1::LrSchedule::COSINE, 10, 100, 6e-5);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 0, 200), 6e-4 * 1 / 11);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 9, 200), 6e-4 * 10 / 11);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 10, 200), 6e-4);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 55, 200), 6e-5 + 0.5 * (6e-4 - 6e-5));
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 100, 200), 6e-5);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 150, 200), 6e-5);
  // Monotone after the warmup.
  for (int64_t s = 10; s < 100; ++s) {
    EXPECT_GE(ScheduledLearningRate(spec, s, 200), ScheduledLearningRate(spec, s + 1, 200)) << s;
  }
}

TEST(LrSchedule, LinearDecayEndsAtTheJobsStepsByDefault) {
  const v1::OptimizerSpec spec = AdamW(1.0, v1::LrSchedule::LINEAR, 0, 0, 0.0);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 0, 4), 1.0);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 1, 4), 0.75);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(spec, 3, 4), 0.25);
}

}  // namespace
}  // namespace shardwise::fsdp
