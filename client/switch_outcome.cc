#include "client/switch_outcome.h"

#include "contracts/job_state.h"

namespace shardwise {
namespace {

const v1::HookSwitch* FindVersion(const v1::Job& job, int32_t version) {
  for (const v1::HookSwitch& s : job.hook_switches()) {
    if (s.version() == version) return &s;
  }
  return nullptr;
}

}  // namespace

SwitchOutcome SwitchOutcomeOf(const v1::Job& job, int32_t version) {
  SwitchOutcome result;
  for (const v1::HookSwitch* s = FindVersion(job, version); s != nullptr;
       s = s->state() == v1::HookSwitch::ABANDONED && s->proposed_again()
               ? FindVersion(job, s->version() + 1)
               : nullptr) {
    result.newest = s;
  }
  if (result.newest != nullptr && result.newest->state() == v1::HookSwitch::APPLIED) {
    result.outcome = HookSwitchOutcome::kApplied;
  } else if (result.newest != nullptr && result.newest->state() == v1::HookSwitch::ABANDONED &&
             !result.newest->proposed_again()) {
    result.outcome = HookSwitchOutcome::kAbandoned;
  } else if (IsTerminal(job.state())) {
    result.outcome = HookSwitchOutcome::kEnded;
  }
  return result;
}

}  // namespace shardwise
