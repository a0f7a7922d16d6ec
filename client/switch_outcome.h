#ifndef SHARDWISE_CLIENT_SWITCH_OUTCOME_H_
#define SHARDWISE_CLIENT_SWITCH_OUTCOME_H_

// Where a comm-hook switch that `shardwise set-hook` asked for stands in the job as read:
// what the command waits for and reports. A switch the ranks refused for a step one had
// started is abandoned, marked `proposed_again`, and proposed again as the next version,
// written in the same write as the abandon; versions count all of a job's switches, so a
// later version that does not continue this chain is another request's.

#include <cstdint>

#include "proto/job.pb.h"

namespace shardwise {

enum class HookSwitchOutcome { kUndecided, kApplied, kAbandoned, kEnded };

struct SwitchOutcome {
  HookSwitchOutcome outcome = HookSwitchOutcome::kUndecided;
  // The newest version of the chain in the job read; null when none is recorded.
  const v1::HookSwitch* newest = nullptr;
};

// Where switch `version` stands in `job`: the newest version of its chain applied,
// abandoned for good, or undecided; or the job ended first.
SwitchOutcome SwitchOutcomeOf(const v1::Job& job, int32_t version);

}  // namespace shardwise

#endif  // SHARDWISE_CLIENT_SWITCH_OUTCOME_H_
