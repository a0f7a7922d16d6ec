// An input missing on a rank's host before the attempt ran (server/missing_inputs.h
// decides whose fault it is): a host that lacks what other hosts have is kept out
// (quarantined) and the job placed again, its restarts untouched, where before one
// worker without the data volume failed every job placed on it for good.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "contracts/job_state.h"
#include "server/job_controller.h"
#include "server/missing_inputs.h"

namespace shardwise {

void JobController::OnInputsMissingLocked(const v1::Job& job, LiveAttempt& attempt,
                                          const v1::AttemptReport& report,
                                          const std::string& worker_id) {
  const int32_t rank = report.rank();
  const absl::Time now = clock_.Now();
  if (job.state() != v1::SCHEDULED) {
    // A replacement (the only rank of a running attempt that checks its paths): the live
    // ranks train on these inputs, so its host lacks them. Its worker is kept out of the
    // next heal, and its group leaves again; the job trains on (an attempt still awaiting
    // its ranks after a coordinator restart fails, re-queued, as for any loss then).
    const std::string what = absl::StrCat(
        "could not find the job's inputs on its host, which the live ranks read on theirs: ",
        report.message());
    QuarantineWorkersLocked(job, {rank}, what, now);
    return LoseRankLocked(job, rank, absl::StrCat(RankName(job, rank), " ", what), worker_id);
  }
  attempt.inputs_missing.emplace(rank,
                                 LiveAttempt::MissingInput{report.message(), report.permanent()});
  DecideMissingInputsLocked(job, now);
}

void JobController::CheckMissingInputsLocked(absl::Time now) {
  std::vector<v1::Job> undecided;
  for (const auto& [job_id, live] : live_) {
    if (live.inputs_missing.empty()) continue;
    auto job = jobs_->Current(job_id);
    if (job.ok() && job->attempt() == live.attempt) undecided.push_back(*job);
  }
  // A decision ends the attempt (and changes live_): after the scan.
  for (const v1::Job& job : undecided) DecideMissingInputsLocked(job, now);
}

void JobController::DecideMissingInputsLocked(const v1::Job& job, absl::Time now) {
  auto live = live_.find(job.id());
  if (live == live_.end() || live->second.inputs_missing.empty()) return;
  // Copied: a decision ends the attempt, and its LiveAttempt with it.
  const std::map<int32_t, LiveAttempt::MissingInput> reported = live->second.inputs_missing;
  MissingInputsFacts facts;
  facts.world_size = job.spec().world_size();
  for (const auto& [rank, missing] : reported) facts.missing.insert(rank);
  facts.not_reached = rendezvous_->RanksNotReached(job.id(), job.attempt());
  facts.deadline_passed = now >= live->second.join_deadline;
  facts.requeues_without_restart = job.requeues_since_running();
  const MissingInputsDecision decision = DecideMissingInputs(facts);
  const int32_t first_rank = reported.begin()->first;
  const std::string& first_message = reported.begin()->second.message;
  switch (decision.kind) {
    case MissingInputsDecision::Kind::kWait:
      return;
    case MissingInputsDecision::Kind::kTheHosts:
      return QuarantineLocked(
          job, {facts.missing.begin(), facts.missing.end()},
          absl::StrCat("could not find the job's inputs on ",
                       facts.missing.size() == 1 ? "its host" : "their hosts", ", where ",
                       decision.found.size() == 1 ? "rank " : "ranks ",
                       absl::StrJoin(decision.found, ", "),
                       " found theirs (a volume not mounted there?): ", first_message),
          now);
    case MissingInputsDecision::Kind::kTheJobs: {
      const bool retryable =
          std::none_of(reported.begin(), reported.end(),
                       [](const auto& missing) { return missing.second.permanent; });
      return LoseRankLocked(
          job, first_rank,
          absl::StrCat(RankName(job, first_rank), " failed: ", first_message, " (", reported.size(),
                       " of the attempt's ", facts.world_size,
                       " ranks found the job's inputs missing on their hosts)"),
          WorkerOfRank(job, first_rank), retryable);
    }
  }
}

}  // namespace shardwise
