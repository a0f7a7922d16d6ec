// The membership's side of the commit vote, without a data plane: what the votes say
// (which ranks leave after the step, which epoch every rank holds), and a rank whose own
// group leaves ending without touching the trainer. The moves themselves run against real
// processes in tests/fault_tolerance_test.

#include "worker/train/membership_moves.h"

#include <atomic>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

// A trainer that must not be called: a vote's tally and a leaving group touch nothing.
class UntouchedRank final : public MembershipMoves::Rank {
 public:
  absl::StatusOr<RankState> CaptureState() override { return Called(); }
  void ReleaseRuntime() override { Called().IgnoreError(); }  // the failure is recorded
  bool CloseRuntimeConnections() override {
    Called().IgnoreError();
    return false;
  }
  absl::Status ConnectRuntime(const TrainingContext&) override { return Called(); }
  Communicator& World() override { std::abort(); }
  const fsdp::ShardingPlan& Plan() const override { std::abort(); }
  absl::Status RestoreState(const RankState&) override { return Called(); }

 private:
  static absl::Status Called() {
    ADD_FAILURE() << "the trainer was called";
    return absl::InternalError("called");
  }
};

class LeavesAfter final : public TrainingHooks {
 public:
  explicit LeavesAfter(int64_t step) : step_(step) {}
  bool LeaveAfter(int64_t step) override { return step >= step_; }

 private:
  int64_t step_;
};

// NO_SHARD over 4 ranks: each rank is a replica group of its own.
v1::JobSpec FourReplicas() {
  v1::JobSpec spec;
  spec.set_world_size(4);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  spec.mutable_fault_tolerance()->set_min_replicas(1);
  return spec;
}

TEST(MembershipMovesTest, TheVotesSayWhoLeavesAndWhichEpochEveryRankHolds) {
  const v1::JobSpec spec = FourReplicas();
  MembershipMailbox mailbox;
  TrainingContext context;
  context.rank = 1;
  context.world_size = 4;
  context.membership = &mailbox;
  LeavesAfter hooks(7);
  UntouchedRank rank;
  MembershipMoves moves(spec, context, &hooks, &rank);
  moves.Start();
  EXPECT_EQ(moves.live_ranks(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(moves.ReadyVote(6), 1.0f);
  EXPECT_EQ(moves.ReadyVote(7), 2.0f);  // leaves with its group after step 7
  // Ranks 1 and 3 leave; every rank holds epoch 2.
  moves.Tally({1, 2, 1, 2, 2, 2, 2, 2}, 4);
  EXPECT_TRUE(moves.MovesAfterStep());
  const absl::Status own = moves.Regroup(8);
  EXPECT_EQ(own.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(own.message(),
                                "rank 1 left the attempt with its group: ranks 1, 3 asked to "
                                "leave after step 7"))
      << own;
  EXPECT_FALSE(moves.MovesAfterStep());
  // Votes that disagree on the epoch (one rank has not heard of it yet): no move.
  moves.Tally({1, 1, 1, 1, 2, 2, 1, 2}, 4);
  EXPECT_FALSE(moves.MovesAfterStep());
}

TEST(MembershipMovesTest, OnlyACollectiveFailureIsRecoverableAndOnlyWithFaultTolerance) {
  const v1::JobSpec spec = FourReplicas();
  MembershipMailbox mailbox;
  TrainingContext tolerant;
  tolerant.membership = &mailbox;
  TrainingHooks hooks;
  UntouchedRank rank;
  MembershipMoves moves(spec, tolerant, &hooks, &rank);
  EXPECT_TRUE(moves.Recoverable(absl::UnavailableError("a peer closed its connection")));
  EXPECT_TRUE(moves.Recoverable(absl::DeadlineExceededError("a peer timed out")));
  EXPECT_FALSE(moves.Recoverable(absl::InvalidArgumentError("a bad token")));
  EXPECT_EQ(moves.PeerTimeout(), std::chrono::seconds(10));
  TrainingContext plain;
  MembershipMoves without(spec, plain, &hooks, &rank);
  EXPECT_FALSE(without.Recoverable(absl::UnavailableError("a peer closed its connection")));
}

}  // namespace
}  // namespace shardwise
