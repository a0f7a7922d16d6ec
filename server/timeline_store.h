#ifndef SHARDWISE_SERVER_TIMELINE_STORE_H_
#define SHARDWISE_SERVER_TIMELINE_STORE_H_

// The spans workers send with their reports, for `shardwise timeline`: per job, the
// latest attempt's newest spans of each rank. Memory is bounded three times: at most
// `spans_per_rank` spans per rank, `spans_per_job` per job, shared by its ranks, and
// `spans_total` over the jobs held, shared by them (older spans are dropped and
// counted); past that total the job whose spans arrived least recently (an ended one,
// as running jobs report all the time) is forgotten. Many jobs running at once each
// keep a smaller share, never just their last report. The controller keeps an attempt's
// timeline in the state file when the attempt ends; what only memory holds, a restart
// forgets.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/job.pb.h"

namespace shardwise {

class TimelineStore {
 public:
  explicit TimelineStore(size_t spans_per_rank = 100000, size_t spans_per_job = size_t{1} << 18,
                         size_t spans_total = size_t{1} << 22)
      : spans_per_rank_(spans_per_rank), spans_per_job_(spans_per_job), spans_total_(spans_total) {}

  // Spans of `rank` (run by `worker_id`) of attempt `attempt`. A newer attempt replaces
  // the job's timeline; an older one's late spans are ignored.
  void Add(const std::string& job_id, int32_t attempt, int32_t rank, const std::string& worker_id,
           const std::vector<v1::Span>& spans, int64_t dropped);

  // The job's timeline; empty (no ranks) if none is held. With `max_spans`, each rank's
  // newest spans within its share of it (at least one), the rest counted as dropped:
  // what the state file keeps of an ended attempt.
  v1::Timeline Get(const std::string& job_id,
                   size_t max_spans = std::numeric_limits<size_t>::max()) const;

 private:
  struct RankSpans {
    std::string worker_id;
    std::deque<v1::Span> spans;
    int64_t dropped = 0;
  };
  struct JobSpans {
    int32_t attempt = 0;
    std::map<int32_t, RankSpans> ranks;
  };

  // The job's spans, counted out of held_.
  void ForgetLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank's share of what its job may hold now.
  size_t RankCapLocked(const JobSpans& job) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const size_t spans_per_rank_;
  const size_t spans_per_job_;
  const size_t spans_total_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, JobSpans> jobs_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);  // least recently fed first
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;                 // spans over every job
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_TIMELINE_STORE_H_
