#include "server/hook_switch_agreement.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

using Kind = HookSwitchAgreement::AckDecision::Kind;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

// A running job of `world_size` ranks at step 10 of `steps`, 2 steps a second.
v1::Job Job(int world_size, int64_t steps) {
  v1::Job job;
  job.set_id("job-1");
  job.mutable_spec()->set_world_size(world_size);
  job.mutable_spec()->set_steps(steps);
  job.mutable_progress()->set_step(10);
  job.mutable_progress()->set_steps_per_second(2);
  for (int r = 0; r < world_size; ++r) {
    v1::RankAssignment* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id("w" + std::to_string(r));
  }
  return job;
}

v1::CommHook Bf16() {
  v1::CommHook hook;
  hook.set_hook(v1::CommHook::BF16_COMPRESS);
  return hook;
}

v1::HookChangeAck Ack(int32_t version, bool accepted, int64_t started_step = 0) {
  v1::HookChangeAck ack;
  ack.set_version(version);
  ack.set_accepted(accepted);
  ack.set_started_step(started_step);
  return ack;
}

TEST(HookSwitchAgreement, ProposesAStepFarEnoughAheadAtTheJobsSpeed) {
  HookSwitchAgreement agreement({.lead = absl::Seconds(2), .min_lead_steps = 3});
  auto proposal = agreement.MakeProposal(Job(2, 100), Bf16(), /*not_before=*/0, kNow);
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  EXPECT_EQ(proposal->step(), 14);  // 2 steps/s for 2 s past step 10
  EXPECT_EQ(proposal->version(), 1);
  EXPECT_EQ(proposal->state(), v1::HookSwitch::PROPOSED);
  EXPECT_EQ(proposal->request_time_ms(), absl::ToUnixMillis(kNow));
  EXPECT_EQ(proposal->new_hook().hook(), v1::CommHook::BF16_COMPRESS);
  // At least the minimum lead, and after `not_before`.
  HookSwitchAgreement slow({.lead = absl::Milliseconds(100), .min_lead_steps = 3});
  EXPECT_EQ(slow.MakeProposal(Job(2, 100), Bf16(), 0, kNow)->step(), 13);
  EXPECT_EQ(slow.MakeProposal(Job(2, 100), Bf16(), 20, kNow)->step(), 23);
  // A job that ends first cannot switch.
  auto late = agreement.MakeProposal(Job(2, 14), Bf16(), 0, kNow);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("a switch needs step 14"), std::string::npos);
}

TEST(HookSwitchAgreement, CommitsWhenEveryRankAccepts) {
  HookSwitchAgreement agreement({});
  const v1::Job job = Job(3, 100);
  ASSERT_TRUE(agreement.BeginRequest(job).ok());
  agreement.Proposed(*agreement.MakeProposal(job, Bf16(), 0, kNow));
  EXPECT_EQ(agreement.BeginRequest(job).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(agreement.OnAck(job, 0, Ack(1, true)).kind, Kind::kNone);
  EXPECT_EQ(agreement.OnAck(job, 0, Ack(1, true)).kind, Kind::kNone);  // counted once
  EXPECT_EQ(agreement.OnAck(job, 2, Ack(7, true)).kind, Kind::kNone);  // another version
  EXPECT_EQ(agreement.OnAck(job, 9, Ack(1, true)).kind, Kind::kNone);  // no such rank
  EXPECT_EQ(agreement.OnAck(job, 2, Ack(1, true)).kind, Kind::kNone);
  EXPECT_EQ(agreement.OnAck(job, 1, Ack(1, true)).kind, Kind::kCommit);
  ASSERT_TRUE(agreement.EndProposal().has_value());
  EXPECT_FALSE(agreement.proposing());
  EXPECT_TRUE(agreement.BeginRequest(job).ok());
}

// A HYBRID fault-tolerant job of groups {0, 1} and {2, 3}, at `epoch` with `live` ranks.
v1::Job TolerantJob(int32_t epoch, const std::vector<int32_t>& live) {
  v1::Job job = Job(4, 100);
  job.set_attempt(1);
  job.mutable_spec()->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
  job.mutable_spec()->mutable_fsdp()->set_shard_group_size(2);
  job.mutable_spec()->mutable_fault_tolerance()->set_min_replicas(1);
  if (epoch > 0) {
    job.mutable_membership()->set_attempt(1);
    job.mutable_membership()->set_epoch(epoch);
    for (int32_t rank : live) job.mutable_membership()->add_live_ranks(rank);
  }
  return job;
}

// Group {2, 3} left while a switch was being agreed, after ranks 0 and 1 accepted: the
// live ranks have all accepted, and the switch commits.
TEST(HookSwitchAgreement, ALossAfterTheLiveRanksAcceptedCommits) {
  HookSwitchAgreement agreement({});
  ASSERT_TRUE(agreement.BeginRequest(TolerantJob(0, {})).ok());
  agreement.Proposed(*agreement.MakeProposal(TolerantJob(0, {}), Bf16(), 0, kNow));
  EXPECT_EQ(agreement.OnAck(TolerantJob(0, {}), 0, Ack(1, true)).kind, Kind::kNone);
  EXPECT_EQ(agreement.OnAck(TolerantJob(0, {}), 1, Ack(1, true)).kind, Kind::kNone);
  EXPECT_EQ(agreement.Reconsider(TolerantJob(1, {0, 1})).kind, Kind::kCommit);
}

// Rank 3 accepted, then its group left and a replacement took its number: the
// replacement answers for itself; a rank that left is not counted.
TEST(HookSwitchAgreement, AReplacementAnswersForItself) {
  HookSwitchAgreement agreement({});
  ASSERT_TRUE(agreement.BeginRequest(TolerantJob(0, {})).ok());
  agreement.Proposed(*agreement.MakeProposal(TolerantJob(0, {}), Bf16(), 0, kNow));
  EXPECT_EQ(agreement.OnAck(TolerantJob(0, {}), 0, Ack(1, true)).kind, Kind::kNone);
  EXPECT_EQ(agreement.OnAck(TolerantJob(0, {}), 3, Ack(1, true)).kind, Kind::kNone);
  EXPECT_EQ(agreement.Reconsider(TolerantJob(1, {0, 1})).kind, Kind::kNone);  // rank 1 to come
  EXPECT_EQ(agreement.OnAck(TolerantJob(1, {0, 1}), 2, Ack(1, true)).kind, Kind::kNone);
  const v1::Job healed = TolerantJob(2, {0, 1, 2, 3});
  EXPECT_EQ(agreement.Reconsider(healed).kind, Kind::kNone);
  EXPECT_EQ(agreement.OnAck(healed, 1, Ack(1, true)).kind, Kind::kNone);
  EXPECT_EQ(agreement.OnAck(healed, 2, Ack(1, true)).kind, Kind::kNone);  // rank 3's is gone
  EXPECT_EQ(agreement.OnAck(healed, 3, Ack(1, true)).kind, Kind::kCommit);
}

TEST(HookSwitchAgreement, ARefusalAbandonsAndRetriesABoundedNumberOfTimes) {
  HookSwitchAgreement agreement({.max_proposals = 2});
  const v1::Job job = Job(2, 100);
  ASSERT_TRUE(agreement.BeginRequest(job).ok());
  agreement.Proposed(*agreement.MakeProposal(job, Bf16(), 0, kNow));
  auto refused = agreement.OnAck(job, 1, Ack(1, false, 15));
  ASSERT_EQ(refused.kind, Kind::kAbandon);
  EXPECT_EQ(refused.reason, "rank 1 (worker w1) had already started step 15");
  ASSERT_TRUE(refused.retry_after.has_value());
  EXPECT_EQ(*refused.retry_after, 15);
  agreement.EndProposal();
  agreement.Proposed(*agreement.MakeProposal(job, Bf16(), 16, kNow));
  refused = agreement.OnAck(job, 0, Ack(1, false, 21));
  ASSERT_EQ(refused.kind, Kind::kAbandon);
  EXPECT_FALSE(refused.retry_after.has_value());  // the second proposal was the last
}

}  // namespace
}  // namespace shardwise
