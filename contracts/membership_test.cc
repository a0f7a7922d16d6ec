#include "contracts/membership.h"

#include "contracts/job_ranks.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::JobSpec Spec(v1::ShardingStrategy::Value strategy, int world, int min_replicas, int group = 0) {
  v1::JobSpec spec;
  spec.set_world_size(world);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  spec.mutable_fsdp()->set_shard_group_size(group);
  spec.mutable_fault_tolerance()->set_min_replicas(min_replicas);
  return spec;
}

std::vector<int32_t> Live(const v1::Membership& m) {
  return {m.live_ranks().begin(), m.live_ranks().end()};
}

// A replacement waits for the live ranks' move: up to two of their steps (the one in
// flight and the next), beyond the collective timeout; the timeout alone before a step.
TEST(Membership, AJoinerWaitsTwoOfTheLongestStepsBeyondTheCollectiveTimeout) {
  EXPECT_EQ(JoinerWait(absl::Seconds(60), absl::Seconds(95)), absl::Seconds(250));
  EXPECT_EQ(JoinerWait(absl::Seconds(60), absl::ZeroDuration()), absl::Seconds(60));
  // No longer than a worker takes (contracts/timeouts.h).
  EXPECT_EQ(JoinerWait(absl::Seconds(60), absl::Hours(24 * 365)), absl::Hours(24 * 30));
  EXPECT_EQ(JoinerWait(absl::Seconds(60), -absl::Seconds(1)), absl::Seconds(60));
}

TEST(Membership, UnderNoShardEachRankIsAReplica) {
  const v1::JobSpec spec = Spec(v1::ShardingStrategy::NO_SHARD, 3, 1);
  EXPECT_EQ(ReplicaGroupOf(spec, 2), std::vector<int32_t>{2});
  MembershipDecision first = DecideAfterLoss(spec, {}, /*attempt=*/1, {2});
  ASSERT_TRUE(first.train_on) << first.summary;
  EXPECT_EQ(first.next.epoch(), 1);
  EXPECT_EQ(Live(first.next), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(first.summary, "rank 2 left; ranks 0, 1 train on (epoch 1, 2 replicas)");
  MembershipDecision second = DecideAfterLoss(spec, first.next, 1, {0});
  ASSERT_TRUE(second.train_on);
  EXPECT_EQ(second.next.epoch(), 2);
  EXPECT_EQ(Live(second.next), std::vector<int32_t>{1});
  EXPECT_EQ(std::vector<int32_t>(second.next.left_ranks().begin(), second.next.left_ranks().end()),
            (std::vector<int32_t>{2, 0}));
  // The last replica cannot leave: the attempt fails.
  EXPECT_FALSE(DecideAfterLoss(spec, second.next, 1, {1}).train_on);
}

TEST(Membership, AHybridGroupLeavesAsAUnitAndMinReplicasHolds) {
  const v1::JobSpec spec = Spec(v1::ShardingStrategy::HYBRID_SHARD, 6, 2, /*group=*/2);
  EXPECT_EQ(ReplicaGroupOf(spec, 3), (std::vector<int32_t>{2, 3}));
  MembershipDecision decision = DecideAfterLoss(spec, {}, 1, {3});
  ASSERT_TRUE(decision.train_on);
  EXPECT_EQ(Live(decision.next), (std::vector<int32_t>{0, 1, 4, 5}));
  MembershipDecision below = DecideAfterLoss(spec, decision.next, 1, {4});
  EXPECT_FALSE(below.train_on);
  EXPECT_EQ(below.summary,
            "without ranks 4, 5 only 1 replica would be left, fewer than "
            "fault_tolerance.min_replicas 2: the attempt cannot train on");
}

TEST(Membership, UnderKeepGlobalTheLeftGroupsRowsGoRoundTheLiveGroups) {
  v1::JobSpec spec = Spec(v1::ShardingStrategy::HYBRID_SHARD, 8, 1, /*group=*/2);
  spec.mutable_fault_tolerance()->set_batch(v1::FaultTolerance::KEEP_GLOBAL);
  // Groups {0,1} and {4,5} left: the first's rows to live group {2,3}, the second's to
  // {6,7}, each rank to the one at its place.
  const std::vector<int32_t> live = {2, 3, 6, 7};
  EXPECT_EQ(CoveredRanks(spec, live, 2), std::vector<int32_t>{0});
  EXPECT_EQ(CoveredRanks(spec, live, 3), std::vector<int32_t>{1});
  EXPECT_EQ(CoveredRanks(spec, live, 6), std::vector<int32_t>{4});
  EXPECT_EQ(CoveredRanks(spec, live, 7), std::vector<int32_t>{5});
  EXPECT_TRUE(CoveredRanks(spec, live, 0).empty()) << "a rank that left covers nothing";
  // Three left, one live group: it takes them all, in order.
  EXPECT_EQ(CoveredRanks(spec, {4, 5}, 5), (std::vector<int32_t>{1, 3, 7}));
  // Nothing left, or DROP: nothing to cover.
  EXPECT_TRUE(CoveredRanks(spec, {0, 1, 2, 3, 4, 5, 6, 7}, 3).empty());
  spec.mutable_fault_tolerance()->set_batch(v1::FaultTolerance::DROP);
  EXPECT_TRUE(CoveredRanks(spec, live, 2).empty());
  // NO_SHARD: rank by rank, round the live ranks.
  v1::JobSpec replicas = Spec(v1::ShardingStrategy::NO_SHARD, 5, 1);
  replicas.mutable_fault_tolerance()->set_batch(v1::FaultTolerance::KEEP_GLOBAL);
  EXPECT_EQ(CoveredRanks(replicas, {1, 3}, 1), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(CoveredRanks(replicas, {1, 3}, 3), std::vector<int32_t>{2});
}

TEST(Membership, TheFirstGroupThatLeftRejoinsInTheNextEpoch) {
  const v1::JobSpec spec = Spec(v1::ShardingStrategy::HYBRID_SHARD, 6, 1, /*group=*/2);
  EXPECT_TRUE(GroupsToHeal(spec, {}, 1, 1).empty());
  MembershipDecision first = DecideAfterLoss(spec, {}, 1, {5});
  MembershipDecision second = DecideAfterLoss(spec, first.next, 1, {0});
  ASSERT_TRUE(second.train_on);
  EXPECT_EQ(GroupsToHeal(spec, second.next, 1, 1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(GroupsToHeal(spec, second.next, 1, 3), (std::vector<int32_t>{0, 1, 4, 5}));
  const v1::Membership healed = Rejoined(spec, second.next, 1, {0, 1});
  EXPECT_EQ(healed.epoch(), 3);
  EXPECT_EQ(healed.attempt(), 1);
  EXPECT_EQ(Live(healed), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(healed.left_ranks().begin(), healed.left_ranks().end()),
            (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(GroupsToHeal(spec, healed, 1, 1), (std::vector<int32_t>{4, 5}));
}

// A job that may grow (fault_tolerance.max_replicas 3, world_size 2 in groups of 2): its
// ranks are numbered over 3 groups; the groups never placed are grown into in order, the
// first from the attempt's initial membership (epoch 0, ranks 0 and 1).
TEST(Membership, AJobThatMayGrowPlacesItsGroupsBeyondWorldSizeInOrder) {
  v1::JobSpec spec = Spec(v1::ShardingStrategy::HYBRID_SHARD, 2, 1, /*group=*/2);
  EXPECT_EQ(JobRanks(spec), 2);
  spec.mutable_fault_tolerance()->set_max_replicas(3);
  EXPECT_EQ(InitialReplicas(spec), 1);
  EXPECT_EQ(MaxReplicas(spec), 3);
  EXPECT_EQ(JobRanks(spec), 6);
  EXPECT_EQ(LiveRanks(spec, {}, 1), (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(GroupsToHeal(spec, {}, 1, 1), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(GroupsToHeal(spec, {}, 1, 2), (std::vector<int32_t>{2, 3, 4, 5}));
  const v1::Membership grown = Rejoined(spec, {}, 1, {2, 3});
  EXPECT_EQ(grown.attempt(), 1);
  EXPECT_EQ(grown.epoch(), 1);
  EXPECT_EQ(Live(grown), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(grown.left_ranks().empty());
  ASSERT_EQ(GroupsToHeal(spec, grown, 1, 1), (std::vector<int32_t>{4, 5}));
  const v1::Membership whole = Rejoined(spec, grown, 1, {4, 5});
  EXPECT_EQ(whole.epoch(), 2);
  EXPECT_TRUE(GroupsToHeal(spec, whole, 1, 1).empty());
  // Of another attempt, the membership counts for nothing: that attempt starts at epoch 1.
  EXPECT_EQ(Rejoined(spec, whole, 2, {2, 3}).epoch(), 1);
  EXPECT_EQ(Live(Rejoined(spec, whole, 2, {2, 3})), (std::vector<int32_t>{0, 1, 2, 3}));
  // KEEP_GLOBAL: the groups not placed yet have rows too, which the live groups cover.
  spec.mutable_fault_tolerance()->set_batch(v1::FaultTolerance::KEEP_GLOBAL);
  EXPECT_EQ(CoveredRanks(spec, {0, 1}, 1), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(CoveredRanks(spec, Live(grown), 0), std::vector<int32_t>{4});
  EXPECT_EQ(CoveredRanks(spec, Live(grown), 1), std::vector<int32_t>{5});
  EXPECT_TRUE(CoveredRanks(spec, Live(grown), 2).empty());
}

TEST(Membership, AMembershipOfAnEarlierAttemptCountsForNothing) {
  const v1::JobSpec spec = Spec(v1::ShardingStrategy::NO_SHARD, 3, 1);
  const MembershipDecision earlier = DecideAfterLoss(spec, {}, 1, {2});
  EXPECT_EQ(LiveRanks(spec, earlier.next, 2), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(DecideAfterLoss(spec, earlier.next, 2, {1}).next.epoch(), 1);
  // A sharded strategy has one group (the world): a lost rank ends the attempt.
  EXPECT_FALSE(DecideAfterLoss(Spec(v1::ShardingStrategy::FULL_SHARD, 4, 1), {}, 1, {0}).train_on);
  v1::JobSpec without = spec;
  without.clear_fault_tolerance();
  EXPECT_FALSE(DecideAfterLoss(without, {}, 1, {2}).train_on);
}

TEST(MembershipEpochKeys, NameTheirEpochBeforeTheFirstSlash) {
  EXPECT_EQ(MembershipEpochKeyPrefix(7), "epoch7");
  EXPECT_EQ(MembershipEpochOfKey("epoch7/world/3"), 7);
  EXPECT_EQ(MembershipEpochOfKey(MembershipEpochKeyPrefix(12) + "/x"), 12);
  EXPECT_EQ(MembershipEpochOfKey("epoch7"), std::nullopt);
  EXPECT_EQ(MembershipEpochOfKey("epochs/1"), std::nullopt);
  EXPECT_EQ(MembershipEpochOfKey("rank0"), std::nullopt);
  EXPECT_EQ(MembershipEpochOfKey("world/epoch7/1"), std::nullopt);
}

}  // namespace
}  // namespace shardwise
