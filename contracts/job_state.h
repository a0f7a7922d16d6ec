#ifndef SHARDWISE_CONTRACTS_JOB_STATE_H_
#define SHARDWISE_CONTRACTS_JOB_STATE_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "proto/job.pb.h"

namespace shardwise {

// SUCCEEDED, FAILED and CANCELLED are final: nothing moves a job out of them.
inline bool IsTerminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

// The worker holding `rank` of the job's current attempt; empty when none does.
inline std::string WorkerOfRank(const v1::Job& job, int32_t rank) {
  for (const v1::RankAssignment& r : job.ranks()) {
    if (r.rank() == rank) return r.worker_id();
  }
  return "";
}

// "rank 1 (worker w1)", or "rank 1" when the job does not say which worker holds it.
inline std::string RankName(const v1::Job& job, int32_t rank) {
  const std::string worker = WorkerOfRank(job, rank);
  if (worker.empty()) return absl::StrCat("rank ", rank);
  return absl::StrCat("rank ", rank, " (worker ", worker, ")");
}

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_STATE_H_
