// FSDP's limit_all_gathers with an FsdpModel: a free event is recorded only where a
// reshard frees a buffer, so that the limiter's queue holds the units really freed. A
// root without parameters (an MLP wrapped one layer a unit) frees nothing; counting its
// reshards left one more event queued each micro-step, and the limiter, waiting for the
// oldest (long done), limited nothing after the first step.

#include "gtest/gtest.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/testing/cpu_rank_model.h"

namespace shardwise::fsdp {
namespace {

v1::JobSpec Spec(int world) {
  v1::JobSpec spec;
  for (int w : {6, 16, 12, 5}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_fsdp()->set_limit_all_gathers(true);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_seed(4);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(96);
  spec.set_global_batch_size(24);
  spec.set_steps(10);
  spec.set_world_size(world);
  return spec;
}

TEST(AllGatherLimit, OnlyFreedBuffersQueueAFreeEvent) {
  constexpr int kWorld = 2;
  const v1::JobSpec spec = Spec(kWorld);
  testing::OnEachRank(spec, [&](int r, FsdpModel& rank_model) {
    FsdpModel* const model = &rank_model;
    const MicroBatch batch = testing::SixRowsOfQuarters();
    // The same micro-step leaves the same frees pending (those after the last unshard;
    // each unshard takes one once two are pending), however many ran before: from the
    // second, which runs the first's prefetch plan.
    int first = -1;
    for (int micro_step = 0; micro_step < 10; ++micro_step) {
      double loss = 0;
      ASSERT_TRUE(model->ForwardBackward(batch, 1.0f, true, &loss).ok());
      ASSERT_TRUE(model->Evaluate(batch).ok());
      if (micro_step == 0) continue;
      if (first < 0) first = model->pending_frees();
      EXPECT_EQ(model->pending_frees(), first) << "rank " << r << ", micro-step " << micro_step;
    }
    EXPECT_LE(first, model->num_units());
  });
}

}  // namespace
}  // namespace shardwise::fsdp
