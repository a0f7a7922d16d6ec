// The rendezvous join deadline: every rank of a new attempt must have joined (reported
// JOINED: reached the rendezvous and connected to its peers) within the job's
// rendezvous.join_timeout_seconds. The rendezvous store knows which ranks made a call;
// a rank that never did is the one to blame, and its worker, which took the assignment
// but never came, is quarantined, so the job's next attempt lands elsewhere.

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "contracts/job_spec_defaults.h"
#include "server/job_controller.h"

namespace shardwise {
namespace {

// "rank 1 (worker w1)", "ranks 1 (worker w1) and 3 (worker w3)".
std::string RanksAndWorkers(const v1::Job& job, const std::vector<int32_t>& ranks) {
  std::vector<std::string> named;
  for (int32_t rank : ranks) {
    std::string worker = "?";
    for (const v1::RankAssignment& assigned : job.ranks()) {
      if (assigned.rank() == rank) worker = assigned.worker_id();
    }
    named.push_back(absl::StrCat(rank, " (worker ", worker, ")"));
  }
  const std::string last = named.back();
  named.pop_back();
  return absl::StrCat(named.empty() ? "rank " : "ranks ", absl::StrJoin(named, ", "),
                      named.empty() ? "" : " and ", last);
}

}  // namespace

void JobController::CheckJoinDeadlinesLocked(absl::Time now) {
  struct Late {
    v1::Job job;
    std::set<int32_t> joined;
    std::vector<int32_t> never_reached;
  };
  std::vector<Late> late;
  for (const auto& [job_id, live] : live_) {
    if (live.awaiting_reattach || now < live.join_deadline) continue;
    auto job = jobs_->Get(job_id);
    if (!job.ok() || job->attempt() != live.attempt) continue;
    if (static_cast<int32_t>(live.joined.size()) >= job->spec().world_size()) continue;
    late.push_back({*job, live.joined, rendezvous_->RanksNotReached(job_id, live.attempt)});
  }
  // Ending an attempt (and the scheduling pass it may run) changes live_: after the scan.
  for (const Late& l : late) EndLateJoinLocked(l.job, l.joined, l.never_reached, now);
}

void JobController::EndLateJoinLocked(const v1::Job& job, const std::set<int32_t>& joined,
                                      const std::vector<int32_t>& never_reached, absl::Time now) {
  const std::string within = absl::StrCat(" within ", JoinTimeoutSeconds(job.spec()),
                                          " s (rendezvous.join_timeout_seconds)");
  if (never_reached.empty()) {
    std::vector<int32_t> unjoined;
    for (int32_t rank = 0; rank < job.spec().world_size(); ++rank) {
      if (joined.count(rank) == 0) unjoined.push_back(rank);
    }
    FailAttemptLocked(job,
                      absl::StrCat("every rank reached the rendezvous, but ",
                                   RanksAndWorkers(job, unjoined), " did not connect to its peers",
                                   within, ": a data-plane port blocked between workers?"),
                      /*lost_worker=*/"");
    return;
  }
  const std::string reason =
      absl::StrCat(RanksAndWorkers(job, never_reached), " did not reach the rendezvous", within,
                   "; quarantined for ", absl::FormatDuration(options_.quarantine));
  for (int32_t rank : never_reached) {
    for (const v1::RankAssignment& assigned : job.ranks()) {
      if (assigned.rank() != rank) continue;
      workers_->Quarantine(assigned.worker_id(),
                           absl::StrCat("rank ", rank, " of ", job.id(), " attempt ", job.attempt(),
                                        " did not reach the rendezvous", within),
                           now + options_.quarantine);
    }
  }
  std::fprintf(stderr, "coordinator: %s: %s\n", job.id().c_str(), reason.c_str());
  RequeueWithoutRestartLocked(job, reason);
}

}  // namespace shardwise
