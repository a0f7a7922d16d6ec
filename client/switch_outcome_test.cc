#include "client/switch_outcome.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::HookSwitch* Add(v1::Job* job, int32_t version, v1::HookSwitch::State state,
                    bool proposed_again = false) {
  v1::HookSwitch* s = job->add_hook_switches();
  s->set_version(version);
  s->set_state(state);
  s->set_proposed_again(proposed_again);
  return s;
}

TEST(SwitchOutcome, FollowsItsOwnChainOfProposals) {
  v1::Job job;
  job.set_state(v1::RUNNING);
  Add(&job, 1, v1::HookSwitch::ABANDONED, /*proposed_again=*/true);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).outcome, HookSwitchOutcome::kUndecided);
  Add(&job, 2, v1::HookSwitch::PROPOSED);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).newest->version(), 2);
  job.mutable_hook_switches(1)->set_state(v1::HookSwitch::APPLIED);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).outcome, HookSwitchOutcome::kApplied);
}

// Another request's switch, proposed once this one was decided, is not this one's: a
// `set-hook` whose watch came late reports its own switch applied.
TEST(SwitchOutcome, ALaterRequestsSwitchIsNotThisOnes) {
  v1::Job job;
  job.set_state(v1::RUNNING);
  Add(&job, 1, v1::HookSwitch::APPLIED);
  Add(&job, 2, v1::HookSwitch::PROPOSED);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).outcome, HookSwitchOutcome::kApplied);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).newest->version(), 1);
  job.mutable_hook_switches(1)->set_state(v1::HookSwitch::ABANDONED);
  Add(&job, 3, v1::HookSwitch::ABANDONED);
  job.mutable_hook_switches(0)->set_state(v1::HookSwitch::ABANDONED);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).outcome, HookSwitchOutcome::kAbandoned);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).newest->version(), 1);
}

TEST(SwitchOutcome, AJobThatEndedFirstEndsTheWait) {
  v1::Job job;
  job.set_state(v1::CANCELLED);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).outcome, HookSwitchOutcome::kEnded);
  EXPECT_EQ(SwitchOutcomeOf(job, 1).newest, nullptr);
}

}  // namespace
}  // namespace shardwise
