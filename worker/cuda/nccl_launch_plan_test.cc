// A rank launches from two threads only where NCCL keeps their one launch order on the
// device (2.26 and later, NCCL_LAUNCH_ORDER_IMPLICIT not 0); the variable is set only
// where the operator left it unset.

#include "worker/cuda/nccl_launch_plan.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise::cuda {
namespace {

TEST(NcclLaunchPlan, VersionsReadAsMajorMinorPatch) {
  EXPECT_EQ(NcclVersionText(22809), "2.28.9");
  EXPECT_EQ(NcclVersionText(kNcclImplicitLaunchOrderVersion), "2.26.0");
}

TEST(NcclLaunchPlan, ANcclThatKeepsTheOrderGetsTwoThreadsAndTheVariableSet) {
  const NcclLaunchPlan plan = PlanNcclLaunches(22809, nullptr);
  EXPECT_TRUE(plan.two_threads);
  EXPECT_TRUE(plan.set_implicit_order);
  EXPECT_EQ(plan.description,
            "NCCL 2.28.9 with NCCL_LAUNCH_ORDER_IMPLICIT=1: all-gathers and reductions launch "
            "from two threads in one order");
  EXPECT_TRUE(PlanNcclLaunches(kNcclImplicitLaunchOrderVersion, nullptr).two_threads);
}

TEST(NcclLaunchPlan, AnOperatorsValueIsKept) {
  const NcclLaunchPlan enabled = PlanNcclLaunches(22809, "1");
  EXPECT_TRUE(enabled.two_threads);
  EXPECT_FALSE(enabled.set_implicit_order);
  for (const char* disabled : {"0", "no"}) {
    SCOPED_TRACE(disabled);
    const NcclLaunchPlan plan = PlanNcclLaunches(22809, disabled);
    EXPECT_FALSE(plan.two_threads);
    EXPECT_FALSE(plan.set_implicit_order);
    EXPECT_EQ(plan.description,
              absl::StrCat("NCCL 2.28.9 with NCCL_LAUNCH_ORDER_IMPLICIT='", disabled,
                           "' (set outside): all-gathers and reductions launch from one "
                           "thread over one communicator (they do not overlap)"));
  }
}

TEST(NcclLaunchPlan, AnOlderNcclGetsOneThread) {
  for (const char* value : {static_cast<const char*>(nullptr), "1"}) {
    const NcclLaunchPlan plan = PlanNcclLaunches(22507, value);
    EXPECT_FALSE(plan.two_threads);
    EXPECT_FALSE(plan.set_implicit_order);
    EXPECT_EQ(plan.description,
              "NCCL 2.25.7 keeps no launch order across communicators "
              "(NCCL_LAUNCH_ORDER_IMPLICIT needs 2.26): all-gathers and reductions launch "
              "from one thread over one communicator (they do not overlap)");
  }
}

}  // namespace
}  // namespace shardwise::cuda
