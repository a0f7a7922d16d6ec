#include "server/missing_inputs.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

using Kind = MissingInputsDecision::Kind;

MissingInputsFacts Facts(int32_t world_size, std::set<int32_t> missing,
                         std::vector<int32_t> not_reached, bool deadline_passed = false,
                         int32_t requeues_without_restart = 0) {
  return {world_size, std::move(missing), std::move(not_reached), deadline_passed,
          requeues_without_restart};
}

TEST(MissingInputs, AnotherRankThatReachedTheRendezvousBlamesTheHosts) {
  // Rank 2's host lacks the inputs; ranks 0, 1 and 3 passed their checks and came.
  const MissingInputsDecision decision = DecideMissingInputs(Facts(4, {2}, {2}));
  EXPECT_EQ(decision.kind, Kind::kTheHosts);
  EXPECT_EQ(decision.found, (std::vector<int32_t>{0, 1, 3}));
  // One host of two: half the ranks may still be the hosts'.
  EXPECT_EQ(DecideMissingInputs(Facts(2, {1}, {1})).kind, Kind::kTheHosts);
}

// Decided once every rank is known, so that all the hosts lacking the inputs are blamed
// at once; at the deadline, on what is known (rank 3 never came).
TEST(MissingInputs, WaitsUntilEveryRankIsKnownOrTheDeadline) {
  EXPECT_EQ(DecideMissingInputs(Facts(4, {2}, {2, 3})).kind, Kind::kWait);
  const MissingInputsDecision at_deadline = DecideMissingInputs(Facts(4, {2}, {2, 3}, true));
  EXPECT_EQ(at_deadline.kind, Kind::kTheHosts);
  EXPECT_EQ(at_deadline.found, (std::vector<int32_t>{0, 1}));
  // Rank 1 has not come yet, nor said anything; none was seen with the inputs by the
  // deadline: the job's, as before the check existed.
  EXPECT_EQ(DecideMissingInputs(Facts(2, {0}, {0, 1})).kind, Kind::kWait);
  EXPECT_EQ(DecideMissingInputs(Facts(2, {0}, {0, 1}, true)).kind, Kind::kTheJobs);
}

TEST(MissingInputs, EveryRankLackingThemIsTheJobsFault) {
  EXPECT_EQ(DecideMissingInputs(Facts(2, {0, 1}, {0, 1})).kind, Kind::kTheJobs);
  EXPECT_TRUE(DecideMissingInputs(Facts(2, {0, 1}, {0, 1})).found.empty());
}

// A stray copy on one host is likelier than three hosts of four without their volume,
// and blaming them would take most of the cluster out of service.
TEST(MissingInputs, MostRanksLackingThemIsTheJobsFaultThoughOneFoundThem) {
  EXPECT_EQ(DecideMissingInputs(Facts(4, {1, 2, 3}, {1, 2, 3})).kind, Kind::kTheJobs);
  EXPECT_EQ(DecideMissingInputs(Facts(4, {2, 3}, {2, 3})).kind, Kind::kTheHosts);
  // Rank 1 not known yet (it may lack them too): wait.
  EXPECT_EQ(DecideMissingInputs(Facts(4, {2, 3}, {1, 2, 3})).kind, Kind::kWait);
}

// Each blame of hosts places the job again uncounted: past the bound, the job's.
TEST(MissingInputs, AJobPlacedAgainTooOftenWithoutARestartIsAtFault) {
  const int32_t bound = kMaxRequeuesWithoutRestart;
  EXPECT_EQ(DecideMissingInputs(Facts(4, {2}, {2}, false, bound - 1)).kind, Kind::kTheHosts);
  EXPECT_EQ(DecideMissingInputs(Facts(4, {2}, {2}, false, bound)).kind, Kind::kTheJobs);
}

TEST(MissingInputs, AReportingRankIsNeverCountedAsHavingFoundThem) {
  // Rank 0 made a rendezvous call but also reported its inputs missing: its report stands.
  EXPECT_EQ(DecideMissingInputs(Facts(2, {0}, {1})).kind, Kind::kWait);
  EXPECT_EQ(DecideMissingInputs(Facts(2, {0, 1}, {})).kind, Kind::kTheJobs);
}

}  // namespace
}  // namespace shardwise
