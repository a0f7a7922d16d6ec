#ifndef SHARDWISE_SERVER_WATCH_HUB_H_
#define SHARDWISE_SERVER_WATCH_HUB_H_

// The JobService.WatchJob streams, on gRPC's callback API: one thread (the hub's) serves
// every watcher, however many there are. The hub takes the ids of the jobs that changed
// from the JobManager and writes each changed job to its watchers: the job as it is now
// (a watcher still writing the previous version gets only the newest once that write is
// done), and, once the job has ended, the final version, then the end of the stream.
// A watcher whose write has not completed within the write timeout (its client reads
// nothing, and HTTP/2's flow control holds the write) is cancelled: it would hold its
// slot for as long as its connection lives, keepalives answered.
//
// Lifecycle: the hub's thread runs from construction to Shutdown() (or destruction);
// every stream must be done (the gRPC server shut down) before the hub is destroyed.
//
// Thread-safety: Watch() is called on gRPC threads; everything else is internal.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/support/server_callback.h"
#include "proto/job.pb.h"
#include "server/job_manager.h"

namespace shardwise {

class WatchHub {
 public:
  // At most `max_watches` streams at once, and `max_per_watcher` of one named watcher
  // (a principal): past either, Watch refuses. One principal may not take every slot.
  // `write_timeout`: how long one write may wait for its client, on `clock`.
  WatchHub(JobManager* jobs, size_t max_watches, size_t max_per_watcher,
           absl::Duration write_timeout = absl::Minutes(1), const Clock* clock = &Clock::Real());
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Whether a watcher may go on watching (its caller's token not revoked since).
  using StillAllowed = std::function<absl::Status()>;

  // A stream of `job_id`'s versions for `watcher` (a principal's name; empty: anyone,
  // bound by the total alone); gRPC owns it until its OnDone. `still_allowed`, if given,
  // is asked before each version is written and every few seconds besides; the stream
  // ends with its error. RESOURCE_EXHAUSTED, saying which bound, when the hub serves
  // max_watches streams already or the watcher its max_per_watcher.
  // `context` (the call's; may be null: then a stalled write is never cancelled) is how a
  // watcher whose write stalls is cancelled.
  absl::StatusOr<grpc::ServerWriteReactor<v1::Job>*> Watch(
      const std::string& job_id, const std::string& watcher = "",
      StillAllowed still_allowed = nullptr, grpc::CallbackServerContext* context = nullptr);
  void Shutdown();
  // The streams served now.
  size_t watches() const;

  class Stream;

 private:
  // A job's newest version, read once per turn of the hub for all its watchers.
  struct Version {
    absl::StatusOr<std::shared_ptr<const v1::Job>> job;
    uint64_t version = 0;
  };
  using Versions = absl::flat_hash_map<std::string, Version>;

  void Run();
  // Writes the newest version of the job to `stream`, if it is not writing already;
  // `versions` holds those read this turn.
  void Serve(const std::shared_ptr<Stream>& stream, Versions* versions);
  void Ready(std::shared_ptr<Stream> stream);  // serve it at the hub's next turn
  void Remove(const std::shared_ptr<Stream>& stream);
  // Every kRecheckInterval: ends the streams whose watchers are no longer allowed, and
  // cancels those whose write has waited past the write timeout.
  void Recheck();

  JobManager* const jobs_;
  const size_t max_watches_;
  const size_t max_per_watcher_;
  const absl::Duration write_timeout_;
  const Clock& clock_;
  mutable absl::Mutex mu_;
  size_t watches_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, size_t> per_watcher_ ABSL_GUARDED_BY(mu_);  // named ones
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::shared_ptr<Stream>>> watchers_
      ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Stream>> ready_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WATCH_HUB_H_
