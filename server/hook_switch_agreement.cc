#include "server/hook_switch_agreement.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "contracts/comm_hook.h"
#include "contracts/job_state.h"
#include "contracts/membership.h"

namespace shardwise {

absl::Status HookSwitchAgreement::BeginRequest(const v1::Job& job) {
  if (proposal_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " is still agreeing switch ", proposal_->version(), " to ",
                     CommHookName(proposal_->new_hook()), " at step ", proposal_->step()));
  }
  proposals_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<v1::HookSwitch> HookSwitchAgreement::MakeProposal(const v1::Job& job,
                                                                 const v1::CommHook& hook,
                                                                 int64_t not_before,
                                                                 absl::Time request_time) const {
  const v1::Progress& progress = job.progress();
  // In double until bounded by the job's steps: a rank's rate may be anything up to
  // worker_number_bounds' 1e300, past what an int64 holds.
  const double wanted =
      std::ceil(progress.steps_per_second() * absl::ToDoubleSeconds(options_.lead));
  const int64_t lead =
      std::max<int64_t>(options_.min_lead_steps, wanted >= static_cast<double>(job.spec().steps())
                                                     ? job.spec().steps()
                                                     : static_cast<int64_t>(std::max(0.0, wanted)));
  const int64_t from = std::max(progress.step(), not_before);
  const int64_t step = from > std::numeric_limits<int64_t>::max() - lead
                           ? std::numeric_limits<int64_t>::max()
                           : from + lead;
  if (step >= job.spec().steps()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id(), " is at step ", progress.step(), " of ", job.spec().steps(),
        "; a switch needs step ", step, " (", lead,
        " steps ahead, for every rank to agree before reaching it), which it will not run"));
  }
  v1::HookSwitch proposal;
  proposal.set_version(job.hook_switches_size() + 1);
  *proposal.mutable_old_hook() = HookInEffect(job);
  *proposal.mutable_new_hook() = hook;
  proposal.set_step(step);
  proposal.set_state(v1::HookSwitch::PROPOSED);
  proposal.set_request_time_ms(absl::ToUnixMillis(request_time));
  return proposal;
}

void HookSwitchAgreement::Proposed(const v1::HookSwitch& proposal) {
  proposal_ = proposal;
  accepted_.clear();
  ++proposals_;
}

HookSwitchAgreement::AckDecision HookSwitchAgreement::OnAck(const v1::Job& job, int32_t rank,
                                                            const v1::HookChangeAck& ack) {
  AckDecision decision;
  // For a proposal already decided, or a rank the job does not train with (any more).
  const std::vector<int32_t> live = LiveRanks(job.spec(), job.membership(), job.attempt());
  if (!proposal_.has_value() || proposal_->version() != ack.version() ||
      std::find(live.begin(), live.end(), rank) == live.end()) {
    return decision;
  }
  if (!ack.accepted()) {
    decision.kind = AckDecision::Kind::kAbandon;
    decision.reason =
        absl::StrCat(RankName(job, rank), " had already started step ", ack.started_step());
    if (proposals_ < options_.max_proposals) decision.retry_after = ack.started_step();
    return decision;
  }
  accepted_.insert(rank);
  return Reconsider(job);
}

HookSwitchAgreement::AckDecision HookSwitchAgreement::Reconsider(const v1::Job& job) {
  AckDecision decision;
  if (!proposal_.has_value()) return decision;
  const std::vector<int32_t> live = LiveRanks(job.spec(), job.membership(), job.attempt());
  // A rank that left answers no more; one that takes its number must answer for itself.
  for (auto it = accepted_.begin(); it != accepted_.end();) {
    it = std::find(live.begin(), live.end(), *it) == live.end() ? accepted_.erase(it) : ++it;
  }
  if (std::all_of(live.begin(), live.end(), [&](int32_t rank) { return accepted_.count(rank); })) {
    decision.kind = AckDecision::Kind::kCommit;
  }
  return decision;
}

std::optional<v1::HookSwitch> HookSwitchAgreement::EndProposal() {
  std::optional<v1::HookSwitch> ended = std::move(proposal_);
  proposal_.reset();
  accepted_.clear();
  return ended;
}

}  // namespace shardwise
