#include "server/execution_order_agreement.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

using Kind = ExecutionOrderAgreement::Decision::Kind;

v1::ExecutionOrder Order(const std::vector<int>& pre, const std::vector<int>& post) {
  v1::ExecutionOrder order;
  for (int u : pre) order.add_pre_forward(u);
  for (int u : post) order.add_post_forward(u);
  return order;
}

// A 2-layer GPT's order: the root (2) unshards first, the blocks run 0 then 1.
const v1::ExecutionOrder kGpt = Order({2, 0, 1}, {0, 1, 2});

v1::Job Job(int world_size) {
  v1::Job job;
  job.set_id("job-1");
  job.mutable_spec()->set_world_size(world_size);
  // A 2-layer GPT, wrapped per block: units 0 and 1, the root 2.
  v1::GptConfig* gpt = job.mutable_spec()->mutable_model()->mutable_gpt();
  gpt->set_vocab_size(11);
  gpt->set_block_size(5);
  gpt->set_n_layer(2);
  gpt->set_n_head(2);
  gpt->set_n_embd(4);
  job.mutable_spec()->mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::BACKWARD_PRE);
  for (int r = 0; r < world_size; ++r) {
    v1::RankAssignment* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id("w" + std::to_string(r));
  }
  return job;
}

v1::AttemptReport Report(v1::AttemptPhase phase, int rank, const v1::ExecutionOrder& order,
                         int64_t step = 0) {
  v1::AttemptReport report;
  report.set_phase(phase);
  report.set_rank(rank);
  report.set_step(step);
  *report.mutable_execution_order() = order;
  return report;
}

TEST(ExecutionOrderAgreement, AgreeingRanksGetTheirOrderAndAPlanRecorded) {
  ExecutionOrderAgreement agreement(3, /*recorded=*/false);
  const v1::Job job = Job(3);
  EXPECT_EQ(agreement.OnReport(job, Report(v1::ORDER_RECORDED, 2, kGpt)).kind, Kind::kNone);
  EXPECT_EQ(agreement.OnReport(job, Report(v1::ORDER_RECORDED, 0, kGpt)).kind, Kind::kNone);
  const auto decision = agreement.OnReport(job, Report(v1::ORDER_RECORDED, 1, kGpt));
  ASSERT_EQ(decision.kind, Kind::kRecord);
  EXPECT_EQ(decision.order.SerializeAsString(), kGpt.SerializeAsString());
  EXPECT_EQ(decision.plan.version(), 1);
  // BACKWARD_PRE: each unit prefetches the one before it in post-forward order.
  EXPECT_EQ(decision.plan.backward_target_size(), 3);
  EXPECT_EQ(decision.plan.backward_target(2), 1);
  EXPECT_EQ(decision.plan.backward_target(1), 0);
  EXPECT_EQ(decision.plan.backward_target(0), -1);
  EXPECT_NE(decision.message.find("execution order recorded, the same on all 3 ranks: "
                                  "pre-forward [2, 0, 1], post-forward [0, 1, 2]"),
            std::string::npos)
      << decision.message;
}

TEST(ExecutionOrderAgreement, DisagreeingRanksFailNamingTheFirstDifference) {
  ExecutionOrderAgreement agreement(2, /*recorded=*/false);
  const v1::Job job = Job(2);
  agreement.OnReport(job, Report(v1::ORDER_RECORDED, 0, kGpt));
  const auto decision =
      agreement.OnReport(job, Report(v1::ORDER_RECORDED, 1, Order({2, 1, 0}, {1, 0, 2})));
  ASSERT_EQ(decision.kind, Kind::kFail);
  EXPECT_NE(decision.message.find("rank 1 differs from rank 0 at pre-forward position 1"),
            std::string::npos)
      << decision.message;
  EXPECT_NE(decision.message.find("their collectives would pair up wrongly"), std::string::npos);
}

TEST(ExecutionOrderAgreement, AChangeIsHeldUntilTheOrderIsRecordedAndWarnedOnce) {
  ExecutionOrderAgreement agreement(2, /*recorded=*/false);
  v1::Job job = Job(2);
  const v1::ExecutionOrder changed = Order({2, 1, 0}, {1, 0, 2});
  agreement.OnReport(job, Report(v1::ORDER_RECORDED, 0, kGpt));
  // Rank 0 is fast: its change arrives before rank 1's first order.
  EXPECT_EQ(agreement.OnReport(job, Report(v1::ORDER_CHANGED, 0, changed, 5)).kind, Kind::kNone);
  const auto recorded = agreement.OnReport(job, Report(v1::ORDER_RECORDED, 1, kGpt));
  ASSERT_EQ(recorded.kind, Kind::kRecord);
  *job.mutable_execution_order() = recorded.order;
  *job.mutable_prefetch_plan() = recorded.plan;
  const auto replanned = agreement.Recorded(job);
  ASSERT_EQ(replanned.kind, Kind::kReplan);
  EXPECT_EQ(replanned.plan.version(), 2);
  EXPECT_EQ(replanned.order.SerializeAsString(), kGpt.SerializeAsString());
  EXPECT_NE(replanned.message.find("warning: rank 0 (worker w0)'s execution order changed at "
                                   "step 5"),
            std::string::npos)
      << replanned.message;
  EXPECT_EQ(agreement.OnReport(job, Report(v1::ORDER_CHANGED, 1, changed, 6)).kind, Kind::kNone);
}

TEST(ExecutionOrderAgreement, AReattachedAttemptHandlesOnlyChanges) {
  ExecutionOrderAgreement agreement(2, /*recorded=*/true);
  v1::Job job = Job(2);
  *job.mutable_execution_order() = kGpt;
  job.mutable_prefetch_plan()->set_version(3);
  EXPECT_EQ(agreement.OnReport(job, Report(v1::ORDER_RECORDED, 0, kGpt)).kind, Kind::kNone);
  const auto decision =
      agreement.OnReport(job, Report(v1::ORDER_CHANGED, 1, Order({2, 1, 0}, {1, 0, 2}), 9));
  ASSERT_EQ(decision.kind, Kind::kReplan);
  EXPECT_EQ(decision.plan.version(), 4);
}

// A report's unit ids are checked against the job's own unit count (3 here): one naming
// unit 2,000,000,000 is warned about, not planned (a plan that size would take 16 GB),
// and neither is one naming INT32_MAX (whose count + 1 would overflow).
TEST(ExecutionOrderAgreement, UnitIdsBeyondTheJobsModelAreNotPlanned) {
  for (const int unit : {3, 2'000'000'000, std::numeric_limits<int32_t>::max()}) {
    ExecutionOrderAgreement agreement(1, /*recorded=*/false);
    const auto decision =
        agreement.OnReport(Job(1), Report(v1::ORDER_RECORDED, 0, Order({unit}, {unit})));
    EXPECT_EQ(decision.kind, Kind::kWarn) << unit;
    EXPECT_NE(decision.message.find(absl::StrCat("names unit ", unit, "; the model has 3")),
              std::string::npos)
        << decision.message;
  }
  ExecutionOrderAgreement agreement(1, /*recorded=*/true);
  v1::Job job = Job(1);
  *job.mutable_execution_order() = kGpt;
  // A change whose two orders hold the same units, so that only the unit's id can refuse it.
  const auto change = agreement.OnReport(
      job, Report(v1::ORDER_CHANGED, 0, Order({2'000'000'000}, {2'000'000'000}), 4));
  EXPECT_EQ(change.kind, Kind::kWarn);
  EXPECT_NE(change.message.find("names unit 2000000000; the model has 3"), std::string::npos)
      << change.message;
}

}  // namespace
}  // namespace shardwise
