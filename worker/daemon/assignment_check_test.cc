#include "worker/daemon/assignment_check.h"

#include <limits>

#include "absl/strings/match.h"
#include "contracts/timeouts.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::Assignment Assigned(int rank, int world_size) {
  v1::Assignment assignment;
  assignment.set_rank(rank);
  assignment.set_world_size(world_size);
  return assignment;
}

TEST(CheckAssignment, TakesARankOfTheWorld) {
  EXPECT_TRUE(CheckAssignment(Assigned(0, 1)).ok());
  EXPECT_TRUE(CheckAssignment(Assigned(3, 4)).ok());
}

TEST(CheckAssignment, RefusesARankOutsideTheWorldNamingBoth) {
  for (const auto& [rank, size] : {std::pair{2, 2}, std::pair{-1, 2}, std::pair{0, 0}}) {
    const absl::Status status = CheckAssignment(Assigned(rank, size));
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << rank << " of " << size;
    EXPECT_TRUE(
        absl::StrContains(status.message(), absl::StrCat("rank ", rank, " of world_size ", size)))
        << status;
  }
}

// Scaled up from 2 ranks to 3 groups of 2: the added groups' ranks are 2 to 5.
TEST(CheckAssignment, TakesAFaultTolerantJobsRankPastItsSpecsWorldSize) {
  v1::Assignment scaled = Assigned(5, 2);
  scaled.mutable_spec()->mutable_fault_tolerance();
  EXPECT_TRUE(CheckAssignment(scaled).ok());
  scaled.set_rank(-1);
  EXPECT_EQ(CheckAssignment(scaled).code(), absl::StatusCode::kInternal);
}

TEST(CheckAssignment, TakesAJoinOnlyForAFaultTolerantJob) {
  v1::Assignment join = Assigned(1, 2);
  join.mutable_join()->set_epoch(7);
  const absl::Status refused = CheckAssignment(join);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(refused.message(),
                                "join (membership epoch 7) for a job without "
                                "fault_tolerance"))
      << refused;
  join.mutable_spec()->mutable_fault_tolerance();
  EXPECT_TRUE(CheckAssignment(join).ok());
}

// Timeouts a deadline can be made from: "never" (INT64_MAX) would overflow std::chrono's
// nanoseconds, and a negative one is no timeout.
TEST(CheckAssignment, RefusesATimeoutNoDeadlineCanBeMadeFrom) {
  v1::Assignment assignment = Assigned(0, 1);
  assignment.set_collective_timeout_ms(kMaxTimeoutMilliseconds);
  EXPECT_TRUE(CheckAssignment(assignment).ok());
  assignment.set_collective_timeout_ms(std::numeric_limits<int64_t>::max());
  absl::Status refused = CheckAssignment(assignment);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(refused.message(),
                                "collective_timeout_ms 9223372036854775807 (0 to 2592000000)"))
      << refused;
  assignment.set_collective_timeout_ms(0);
  assignment.set_join_wait_ms(-1);
  refused = CheckAssignment(assignment);
  EXPECT_TRUE(absl::StrContains(refused.message(), "join_wait_ms -1 (0 to 2592000000)")) << refused;
}

}  // namespace
}  // namespace shardwise
