// The plan of who gives whom a shard's state, and the transfer itself between ranks that
// are threads of this process, over real Gloo on loopback.

#include "worker/train/state_transfer.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/comm/gloo_communicator.h"

namespace shardwise {
namespace {

TEST(PlanStateMoves, NothingMovesWhenEveryHolderIsAtTheMostSteps) {
  auto moves = PlanStateMoves({5, 5, 5, 5}, {1, 3}, 1);
  ASSERT_TRUE(moves.ok());
  EXPECT_TRUE(moves->empty());
}

// Three groups of two: group 2 (ranks 4, 5) replaces one that left and holds nothing yet.
// Shard 0 takes its donor from group 0, shard 1 from group 1: the two streams leave
// different groups.
TEST(PlanStateMoves, TheShardsTakeTheirDonorsFromTheGroupsAheadInTurn) {
  const std::vector<double> steps = {40, 40, 40, 40, -1, -1};
  auto shard0 = PlanStateMoves(steps, {0, 2, 4}, 0);
  auto shard1 = PlanStateMoves(steps, {1, 3, 5}, 1);
  ASSERT_TRUE(shard0.ok() && shard1.ok());
  EXPECT_EQ(*shard0, (std::vector<StateMove>{{0, 4}}));
  EXPECT_EQ(*shard1, (std::vector<StateMove>{{3, 5}}));
}

// One group ahead and two behind: both take from it, as one donor is all there is.
TEST(PlanStateMoves, SeveralReceiversShareTheOnlyDonor) {
  auto moves = PlanStateMoves({8, 7, 7}, {0, 1, 2}, 0);
  ASSERT_TRUE(moves.ok());
  EXPECT_EQ(*moves, (std::vector<StateMove>{{0, 1}, {0, 2}}));
}

// Every rank is a replacement, or was cut short in its transfer: nobody may give.
TEST(PlanStateMoves, NoRankWithAStateIsAnError) {
  auto moves = PlanStateMoves({-1, -1}, {0, 1}, 0);
  EXPECT_EQ(moves.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(moves.status().message().find("no live rank holds a state to give"), std::string::npos)
      << moves.status();
}

TEST(PlanStateMoves, AShardThatNoHolderHasAtTheMostStepsIsAnError) {
  // Shard 1's holders (ranks 1, 3) are both behind rank 0's step.
  auto moves = PlanStateMoves({9, 8, 9, 8}, {1, 3}, 1);
  EXPECT_EQ(moves.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(moves.status().message().find("no live rank holds shard 1 at step 9"),
            std::string::npos)
      << moves.status();
}

// A donor's state: two units, AdamW's two buffers each, a loss scaler.
RankState DonorState() {
  RankState state;
  state.shards = {{1.5f, -2.0f, 3.25f}, {0.5f}};
  for (const auto& shard : state.shards) {
    std::vector<float> avg(shard.size(), 0.125f), sq(shard.size(), 4.0f);
    state.optimizer.push_back({{"exp_avg", avg}, {"exp_avg_sq", sq}});
  }
  state.optimizer_steps = 40;
  state.steps = 40;
  state.scaler.set_scale(1024);
  state.scaler.set_growth_tracker(7);
  return state;
}

// A replacement that never stepped: its shards' sizes, no optimizer state, no steps.
RankState FreshState() {
  RankState state;
  state.shards = {{0, 0, 0}, {0}};
  state.optimizer.resize(2);
  state.steps = -1;
  return state;
}

void RunPair(const std::function<void(Communicator&)>& donor,
             const std::function<void(Communicator&)>& receiver) {
  gloo::rendezvous::HashStore store;
  auto run = [&](int rank, const std::function<void(Communicator&)>& body) {
    auto comm = GlooCommunicator::ConnectGroup(store, "world", {0, 1}, rank, {});
    ASSERT_TRUE(comm.ok()) << comm.status();
    body(**comm);
  };
  std::thread first([&] { run(0, donor); });
  run(1, receiver);
  first.join();
}

constexpr double kCheckpoint = static_cast<double>(AfterSteps::kCheckpoint);
constexpr double kEvaluation = static_cast<double>(AfterSteps::kEvaluation);
constexpr double kNextStep = static_cast<double>(AfterSteps::kNextStep);

// Rank 0's evaluation completed and it went on into the next step; rank 1's failed: both
// evaluate again, so that their collectives pair up.
TEST(AgreedNext, ThePartOneRankAtTheMostStepsHasNotFinishedIsDoneAgainByAll) {
  auto next = AgreedNext({40, 40}, {kNextStep, kEvaluation});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, AfterSteps::kEvaluation);
  next = AgreedNext({40, 40, 40}, {kEvaluation, kCheckpoint, kNextStep});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, AfterSteps::kCheckpoint);
}

// The ranks behind (a replacement, or a group one step behind after a split vote) say
// nothing of where they stand: they take the state, and the part, of the ranks ahead.
TEST(AgreedNext, RanksBehindTakeThePartOfTheRanksAhead) {
  auto next = AgreedNext({41, 40, -1}, {kNextStep, kCheckpoint, kCheckpoint});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, AfterSteps::kNextStep);
  next = AgreedNext({41, 41, 40}, {kCheckpoint, kCheckpoint, kNextStep});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, AfterSteps::kCheckpoint);
}

TEST(AgreedNext, APartThatIsNoneIsAnError) {
  auto next = AgreedNext({40, 40}, {kNextStep, 7});
  EXPECT_TRUE(absl::IsInvalidArgument(next.status())) << next.status();
  EXPECT_TRUE(absl::StrContains(next.status().message(), "rank 1 says it goes on from part 7"))
      << next.status();
  EXPECT_TRUE(absl::IsInvalidArgument(AgreedNext({40, 40}, {kNextStep}).status()));
}

TEST(StateTransfer, AReplacementTakesTheDonorsStateBitForBit) {
  const RankState sent = DonorState();
  const std::string digest = StateDigest(sent);
  RankState received = FreshState();
  absl::StatusOr<StateReceipt> receipt;
  RankPosition position;
  RunPair(
      [&](Communicator& world) { EXPECT_TRUE(SendState(world, 1, sent, digest, nullptr).ok()); },
      [&](Communicator& world) {
        receipt = ReceiveState(world, 0, {"exp_avg", "exp_avg_sq"}, &received, &position);
      });
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(receipt->digest, digest);
  EXPECT_EQ(StateDigest(received), digest);
  EXPECT_EQ(received.shards, sent.shards);
  EXPECT_EQ(received.optimizer, sent.optimizer);
  EXPECT_EQ(received.steps, 40);
  EXPECT_EQ(received.scaler.growth_tracker(), 7);
  // 4 floats of shards and 8 of optimizer state, the layout (2 + 2 per unit int64s), the
  // counters, the scaler's bytes and the digest.
  EXPECT_EQ(receipt->bytes,
            12 * 4 + 6 * 8 + 16 + static_cast<int64_t>(sent.scaler.ByteSizeLong()) + 32);
  EXPECT_EQ(position.Snapshot().phase(), "receiving optimizer state");
}

// A donor that never stepped either (a heal before the first optimizer step) has no
// optimizer state: the replacement, which made room for it before the donor's first
// byte, ends with none as well, its digest the donor's.
TEST(StateTransfer, AReplacementOfADonorThatNeverSteppedEndsWithoutOptimizerState) {
  RankState sent = DonorState();
  for (auto& unit : sent.optimizer) unit.clear();
  sent.optimizer_steps = 0;
  const std::string digest = StateDigest(sent);
  RankState received = FreshState();
  // First a donor lost before its first byte: the room made for its state is left as it
  // was found, so the next epoch's donor, which never stepped either, is taken.
  // The donor leaves once the receiver's connect has returned: Gloo's TCP pair reads
  // while it connects, so a donor gone sooner fails the connect instead (the bound only
  // keeps a receiver whose connect failed from hanging the test).
  absl::StatusOr<StateReceipt> cut;
  absl::Notification receiver_connected;
  RunPair(
      [&](Communicator&) { receiver_connected.WaitForNotificationWithTimeout(absl::Seconds(60)); },
      [&](Communicator& world) {
        receiver_connected.Notify();
        cut = ReceiveState(world, 0, {"exp_avg", "exp_avg_sq"}, &received, nullptr);
      });
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(received.steps, -1);
  absl::StatusOr<StateReceipt> receipt;
  RunPair(
      [&](Communicator& world) { EXPECT_TRUE(SendState(world, 1, sent, digest, nullptr).ok()); },
      [&](Communicator& world) {
        receipt = ReceiveState(world, 0, {"exp_avg", "exp_avg_sq"}, &received, nullptr);
      });
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(receipt->digest, digest);
  EXPECT_EQ(received.optimizer, sent.optimizer);
}

// A receiver whose optimizer state differs from the donor's (another optimizer) is
// refused before any float crosses, naming both counts.
TEST(StateTransfer, ADonorOfAnotherOptimizerIsRefused) {
  const RankState sent = DonorState();
  RankState received = FreshState();
  for (auto& unit : received.optimizer) unit.push_back({"momentum_buffer", {0, 0, 0}});
  absl::StatusOr<StateReceipt> receipt;
  RunPair(
      [&](Communicator& world) {
        EXPECT_FALSE(SendState(world, 1, sent, StateDigest(sent), nullptr).ok());
      },
      [&](Communicator& world) {
        receipt = ReceiveState(world, 0, {"momentum_buffer"}, &received, nullptr);
      });
  EXPECT_EQ(receipt.status().code(), absl::StatusCode::kInternal) << receipt.status();
  EXPECT_TRUE(absl::StrContains(receipt.status().message(),
                                "unit 0 has 1 optimizer state buffers here, 2 on the donor"))
      << receipt.status();
}

TEST(StateTransfer, AStateThatDoesNotHashToTheDonorsDigestIsDataLoss) {
  const RankState sent = DonorState();
  RankState received = FreshState();
  absl::StatusOr<StateReceipt> receipt;
  RunPair(
      [&](Communicator& world) {
        EXPECT_TRUE(SendState(world, 1, sent, std::string(32, '0'), nullptr).ok());
      },
      [&](Communicator& world) {
        receipt = ReceiveState(world, 0, {"exp_avg", "exp_avg_sq"}, &received, nullptr);
      });
  EXPECT_EQ(receipt.status().code(), absl::StatusCode::kDataLoss) << receipt.status();
  EXPECT_EQ(received.steps, -1);  // to be healed whole again, never given or trained on
}

TEST(StateTransfer, ADonorOfAnotherShardLayoutIsRefusedBeforeAnyFloatCrosses) {
  RankState sent = DonorState();
  sent.shards[0].push_back(9);
  sent.optimizer[0][0].second.push_back(0);
  sent.optimizer[0][1].second.push_back(0);
  RankState received = FreshState();
  absl::StatusOr<StateReceipt> receipt;
  RunPair(
      [&](Communicator& world) {
        // The receiver stops after the layout: the donor's sends after it fail once the
        // receiver's connections close.
        EXPECT_FALSE(SendState(world, 1, sent, StateDigest(sent), nullptr).ok());
      },
      [&](Communicator& world) {
        receipt = ReceiveState(world, 0, {"exp_avg", "exp_avg_sq"}, &received, nullptr);
      });
  EXPECT_EQ(receipt.status().code(), absl::StatusCode::kInternal) << receipt.status();
  EXPECT_NE(receipt.status().message().find("unit 0's shard has 4 floats on the donor, 3 here"),
            std::string::npos)
      << receipt.status();
}

}  // namespace
}  // namespace shardwise
