#ifndef SHARDWISE_SERVER_STALL_DETECTOR_H_
#define SHARDWISE_SERVER_STALL_DETECTOR_H_

// Names the ranks that keep the others waiting in a collective. Every rank's heartbeat
// carries its position (step, phase, unit, the collective it is in and for how long, and
// how many collectives it has entered on each of its threads, its lanes); the detector
// keeps each running attempt's latest positions and, when asked at a given time, says
// which attempts have ranks stuck in a collective for ranks that have not entered it.
//
// It decides and keeps no other state: the JobController records the stalls it returns
// as events, or fails the attempt for those past the abort time.
//
// Thread-safety: all methods may be called from any thread. Record() runs on the
// heartbeat path and holds the detector's own lock only for a map update.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class StallDetector {
 public:
  struct Options {
    absl::Duration heartbeat_interval = absl::Seconds(1);
    // Ranks waiting in a collective this long for ranks that have not entered it are a
    // stall; with abort > 0 a stall that long is reported with `abort` set.
    absl::Duration warning = absl::Seconds(60);
    absl::Duration abort = absl::ZeroDuration();
  };

  explicit StallDetector(const Options& options) : options_(options) {}

  // Starts following the live `ranks` of an attempt (replacing the job's earlier ones):
  // after a membership change, the ranks that left are not waited for.
  void Track(const std::string& job_id, int32_t attempt, std::vector<int32_t> ranks);
  // Stops following the job's attempt.
  void Forget(const std::string& job_id);

  // A rank's position from a heartbeat received at `now`; ignored unless the attempt is
  // tracked.
  void Record(const std::string& job_id, int32_t attempt, int32_t rank,
              const v1::RankPosition& position, absl::Time now);

  struct Stall {
    std::string job_id;
    int32_t attempt = 0;
    std::string message;
    bool abort = false;  // waited past Options::abort: the attempt should fail
  };
  // The stalls at `now`: each stalled collective is reported once as a warning, and
  // again at every check once it is past the abort time.
  std::vector<Stall> Check(absl::Time now);

 private:
  struct Seen {
    v1::RankPosition position;
    absl::Time received;
    absl::Time moved;  // when its step, phase, unit or collective last changed
  };
  struct Attempt {
    int32_t attempt = 0;
    std::vector<int32_t> ranks;  // ascending
    std::map<int32_t, Seen> positions;
    // The collective last reported as stalled, by the waiter's epoch and total count.
    std::pair<int32_t, int64_t> reported_at{-1, -1};
  };

  std::optional<Stall> CheckAttempt(const std::string& job_id, Attempt& attempt,
                                    absl::Time now) const;

  const Options options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Attempt> attempts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_STALL_DETECTOR_H_
