#include "worker/daemon/assignment_check.h"

#include "absl/strings/match.h"
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

}  // namespace
}  // namespace shardwise
