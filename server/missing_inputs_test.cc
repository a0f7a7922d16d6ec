#include "server/missing_inputs.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

using Kind = MissingInputsDecision::Kind;

TEST(MissingInputs, AnotherRankThatReachedTheRendezvousBlamesTheHosts) {
  // Rank 2's host lacks the inputs; ranks 0 and 1 passed their checks and came.
  const MissingInputsDecision decision =
      DecideMissingInputs(4, /*missing=*/{2}, /*not_reached=*/{2, 3}, false);
  EXPECT_EQ(decision.kind, Kind::kTheHosts);
  EXPECT_EQ(decision.found, (std::vector<int32_t>{0, 1}));
  // Decided the same at the deadline: a rank was seen to have them.
  EXPECT_EQ(DecideMissingInputs(4, {2}, {2, 3}, true).kind, Kind::kTheHosts);
}

TEST(MissingInputs, EveryRankLackingThemIsTheJobsFault) {
  EXPECT_EQ(DecideMissingInputs(2, {0, 1}, {0, 1}, false).kind, Kind::kTheJobs);
  EXPECT_TRUE(DecideMissingInputs(2, {0, 1}, {0, 1}, false).found.empty());
}

TEST(MissingInputs, WaitsForTheOthersUntilTheDeadline) {
  // Rank 1 has not come yet, nor said anything.
  EXPECT_EQ(DecideMissingInputs(2, {0}, {0, 1}, false).kind, Kind::kWait);
  // None was seen to have them by the deadline: the job's, as before the check existed.
  EXPECT_EQ(DecideMissingInputs(2, {0}, {0, 1}, true).kind, Kind::kTheJobs);
}

TEST(MissingInputs, AReportingRankIsNeverCountedAsHavingFoundThem) {
  // Rank 0 made a rendezvous call (a scope reopened by an earlier call of its worker?) but
  // also reported its inputs missing: its report stands.
  EXPECT_EQ(DecideMissingInputs(2, {0}, {1}, false).kind, Kind::kWait);
  EXPECT_EQ(DecideMissingInputs(2, {0, 1}, {}, false).kind, Kind::kTheJobs);
}

}  // namespace
}  // namespace shardwise
