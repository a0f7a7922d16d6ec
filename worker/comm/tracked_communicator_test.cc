// The rank's position around stream-ordered collectives: the call counts once; while its
// completion is polled and not there, the lane shows "completion" without counting
// another collective (so ranks' counts still pair up), and it clears once completed.
// The inner communicator stands in for NCCL's stream-ordered mode, which needs a GPU
// (nccl_communicator_test covers that one).

#include "worker/comm/tracked_communicator.h"

#include <string>

#include "gtest/gtest.h"
#include "worker/comm/solo_communicator.h"

namespace shardwise {
namespace {

// A group of one whose collectives complete after `pending` polls.
class SlowToComplete final : public Communicator {
 public:
  using Communicator::AllGather;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllGather(const void* shard, size_t numel, void* out, ScalarType type) override {
    pending = 2;
    return solo_.AllGather(shard, numel, out, type);
  }
  absl::Status ReduceScatter(void*, size_t, void*, ScalarType) override {
    return absl::UnimplementedError("not used");
  }
  absl::Status AllReduce(void*, size_t, ScalarType) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int, ScalarType) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  bool stream_ordered() const override { return true; }
  absl::StatusOr<bool> CollectivesCompleted() override {
    if (pending == 0) return true;
    --pending;
    return false;
  }
  int pending = 0;

 private:
  SoloCommunicator solo_;
};

TEST(TrackedCommunicator, AwaitingCompletionShowsOnTheLaneWithoutCountingACollective) {
  SlowToComplete inner;
  RankPosition position;
  TrackedCommunicator tracked(&inner, &position, /*timeline=*/nullptr);
  EXPECT_TRUE(tracked.stream_ordered());
  float shard = 1, out = 0;
  ASSERT_TRUE(tracked.AllGather(&shard, 1, &out).ok());
  v1::RankPosition after_call = position.Snapshot();
  EXPECT_EQ(after_call.collectives(), 1);
  EXPECT_EQ(after_call.collective(), "");  // returned once enqueued

  for (int poll = 0; poll < 2; ++poll) {
    const absl::StatusOr<bool> completed = tracked.CollectivesCompleted();
    ASSERT_TRUE(completed.ok());
    EXPECT_FALSE(*completed);
    const v1::RankPosition waiting = position.Snapshot();
    EXPECT_EQ(waiting.collective(), "completion");
    EXPECT_EQ(waiting.collectives(), 1) << "a poll is not another collective";
  }
  const absl::StatusOr<bool> completed = tracked.CollectivesCompleted();
  ASSERT_TRUE(completed.ok());
  EXPECT_TRUE(*completed);
  EXPECT_EQ(position.Snapshot().collective(), "");
  EXPECT_EQ(position.Snapshot().collectives(), 1);
}

// A new membership epoch counts collectives from 0 (every rank of it at the same point),
// and the position says which epoch it counts from.
TEST(TrackedCommunicator, ANewEpochCountsCollectivesFromZero) {
  SoloCommunicator inner;
  RankPosition position;
  TrackedCommunicator tracked(&inner, &position, /*timeline=*/nullptr);
  float value = 1;
  ASSERT_TRUE(tracked.AllReduce(&value, 1, ScalarType::kFloat32).ok());
  ASSERT_TRUE(tracked.AllReduce(&value, 1, ScalarType::kFloat32).ok());
  EXPECT_EQ(position.Snapshot().collectives(), 2);
  EXPECT_EQ(position.Snapshot().epoch(), 0);
  position.StartEpoch(3);
  ASSERT_TRUE(tracked.AllReduce(&value, 1, ScalarType::kFloat32).ok());
  const v1::RankPosition after = position.Snapshot();
  EXPECT_EQ(after.epoch(), 3);
  EXPECT_EQ(after.collectives(), 1);
  int64_t on_lanes = 0;
  for (int64_t count : after.lane_collectives()) on_lanes += count;
  EXPECT_EQ(on_lanes, 1);
}

// A reduction polls its shard group, then its replicate group, on one lane: the replicate
// group with nothing pending must not clear the shard group's wait, so a peer that never
// joins the reduce-scatter is still named.
TEST(TrackedCommunicator, AGroupWithNothingPendingLeavesAnotherGroupsWaitOnTheLane) {
  SlowToComplete shard_inner, replicate_inner;
  RankPosition position;
  TrackedCommunicator shard(&shard_inner, &position, /*timeline=*/nullptr);
  TrackedCommunicator replicate(&replicate_inner, &position, /*timeline=*/nullptr);
  float value = 1, out = 0;
  ASSERT_TRUE(shard.AllGather(&value, 1, &out).ok());
  for (int poll = 0; poll < 2; ++poll) {
    const absl::StatusOr<bool> shard_done = shard.CollectivesCompleted();
    const absl::StatusOr<bool> replicate_done = replicate.CollectivesCompleted();
    ASSERT_TRUE(shard_done.ok() && replicate_done.ok());
    EXPECT_FALSE(*shard_done);
    EXPECT_TRUE(*replicate_done);
    EXPECT_EQ(position.Snapshot().collective(), "completion");
  }
  const absl::StatusOr<bool> shard_done = shard.CollectivesCompleted();
  ASSERT_TRUE(shard_done.ok() && *shard_done);
  EXPECT_EQ(position.Snapshot().collective(), "");
}

TEST(TrackedCommunicator, ACommunicatorThatCompletesAsItIsCalledNeverShowsCompletion) {
  SoloCommunicator inner;
  RankPosition position;
  TrackedCommunicator tracked(&inner, &position, /*timeline=*/nullptr);
  EXPECT_FALSE(tracked.stream_ordered());
  const absl::StatusOr<bool> completed = tracked.CollectivesCompleted();
  ASSERT_TRUE(completed.ok());
  EXPECT_TRUE(*completed);
  EXPECT_EQ(position.Snapshot().collective(), "");
  EXPECT_EQ(position.Snapshot().collectives(), 0);
}

}  // namespace
}  // namespace shardwise
