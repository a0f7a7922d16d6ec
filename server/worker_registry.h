#ifndef SHARDWISE_SERVER_WORKER_REGISTRY_H_
#define SHARDWISE_SERVER_WORKER_REGISTRY_H_

// Tracks worker daemons: registration, their one live session, heartbeats, what each is
// doing, and which have gone silent. It decides nothing about jobs: the JobController
// reads it and tells it what changed. Workers are not persisted: after a coordinator
// restart they register again (they retry with backoff).
//
// The registry is bounded: at most Options::max_workers registrations (a new name beyond
// that is RESOURCE_EXHAUSTED), and a worker lost for longer than Options::lost_retention
// is forgotten (RemoveLongLost), so names that come and go cannot fill it.
//
// Thread-safety: all methods may be called from any thread. Heartbeat() runs on the
// heartbeat path: it holds the registry's lock for a lookup, and nothing holds that lock
// across I/O.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"
#include "server/scheduler.h"
#include "server/session_outbox.h"
#include "server/unread_messages.h"

namespace shardwise {

class WorkerRegistry {
 public:
  struct Options {
    const Clock* clock = &Clock::Real();
    size_t max_workers = 10000;
    absl::Duration lost_retention = absl::Hours(1);
  };

  WorkerRegistry() : WorkerRegistry(Options()) {}
  explicit WorkerRegistry(const Options& options) : options_(options) {}

  // Registers a worker, or re-registers one under the same name (a restarted or
  // reconnecting daemon); returns its id and the state it had before (UNSPECIFIED if
  // new). RESOURCE_EXHAUSTED for a new name when max_workers are registered.
  struct Registration {
    std::string worker_id;
    v1::WorkerInfo previous;
  };
  absl::StatusOr<Registration> Register(const v1::RegisterWorkerRequest& request);

  // Makes `outbox` the worker's live session (closing any older one) and marks the worker
  // alive. NOT_FOUND for an unregistered id.
  absl::Status AttachSession(const std::string& worker_id,
                             const std::shared_ptr<SessionOutbox>& outbox);

  // True if `outbox` was the worker's live session (so the worker is now unreachable).
  bool DetachSession(const std::string& worker_id, const std::shared_ptr<SessionOutbox>& outbox);

  // What a worker is assigned, as the registry knows it.
  struct Assignment {
    v1::WorkerState state = v1::WORKER_STATE_UNSPECIFIED;
    std::string job_id;
    int32_t attempt = 0;
    int32_t rank = 0;
  };
  // Records a heartbeat now, with the messages of its session the worker says it read
  // (Heartbeat.messages_read; nullopt from a release that does not say) and whether it
  // is shutting down (Heartbeat.stopping: MarkStopping), each taken only when `session`
  // (the one it came on; null: any) is the worker's current one (a heartbeat in flight
  // from a pod replaced under the same name says nothing of the new one); NOT_FOUND for
  // an unregistered id.
  absl::StatusOr<Assignment> Heartbeat(const std::string& worker_id,
                                       std::optional<uint64_t> messages_read = std::nullopt,
                                       const SessionOutbox* session = nullptr,
                                       bool stopping = false);

  // Queues a message on the worker's live session; false if it has none.
  bool Send(const std::string& worker_id, const v1::CoordinatorMessage& message);

  void SetBusy(const std::string& worker_id, const std::string& job_id, int32_t attempt,
               int32_t rank);
  // Whether the worker runs `rank` of `job_id`'s `attempt` now (BUSY with it, or DRAINING
  // out of it): what it reports of another rank is late, its rank done or left.
  bool Runs(const std::string& worker_id, const std::string& job_id, int32_t attempt,
            int32_t rank) const;
  // A BUSY worker's attempt was aborted: the worker is DRAINING until it reports idle,
  // and `abort` (the message telling it so) is owed to it until a session takes it. A
  // worker without a session (registered, its session not yet open) gets it when its
  // session attaches: an abort is part of the worker's state, not a message that may be
  // dropped, or the worker would run the dead attempt on and never come back idle.
  void Drain(const std::string& worker_id, const v1::CoordinatorMessage& abort);
  // A worker registering (no session yet) while it still runs an attempt the coordinator
  // no longer runs: when its session attaches it is DRAINING, not IDLE, and gets `abort`
  // first. Scheduled at once, it would refuse the assignment (its daemon still runs the
  // old attempt) and cost that job a restart.
  void DrainOnAttach(const std::string& worker_id, const v1::CoordinatorMessage& abort);
  // IDLE, its job forgotten; DRAINING instead for a worker that is stopping.
  void SetIdle(const std::string& worker_id);
  // A worker that said it is shutting down (SIGTERM; a report with worker_leaving): its
  // rank's last report, which follows, must not make it a place for the next job.
  void MarkStopping(const std::string& worker_id);
  // Whether the worker said it is shutting down (MarkStopping) since it registered.
  bool IsStopping(const std::string& worker_id);
  // A BUSY worker that refused its assignment while still running another attempt: it is
  // DRAINING, idle once a heartbeat says it runs nothing (the heartbeats naming the other
  // attempt are answered with an abort).
  void AwaitIdle(const std::string& worker_id);
  // Keeps the worker out of Idle() (so out of scheduling) until `until`, saying why in
  // its WorkerInfo; it keeps the quarantine when it registers again. A worker not
  // registered yet (a quarantine restored at start) gets it when it registers.
  void Quarantine(const std::string& worker_id, const std::string& reason, absl::Time until);
  // Marks the worker lost and closes its session; returns it as it was before.
  absl::StatusOr<v1::WorkerInfo> MarkLost(const std::string& worker_id, const std::string& reason);

  // Workers whose last heartbeat is older than `timeout` (and not yet lost).
  std::vector<std::string> Silent(absl::Duration timeout) const;
  // Workers (not lost) whose session has had a message waiting, none taken, for longer
  // than `timeout`: a daemon that reads nothing can be told nothing, not even to abort.
  // Or, for a worker whose heartbeats count its reads, a message written to it that they
  // have not counted for that long (UnreadMessages), however little fills its connection.
  // Measured from the first call that saw the wait (the write), so a worker is named late
  // by up to the interval between calls, never early.
  std::vector<std::string> Unread(absl::Duration timeout);
  // Forgets workers lost for longer than Options::lost_retention; returns their ids.
  std::vector<std::string> RemoveLongLost();

  // Idle workers of `device` with a session, not quarantined; sorted by id.
  std::vector<v1::WorkerInfo> Idle(v1::DeviceKind device) const;
  // What every worker of `device` that is not lost offers (scheduler.h), sorted by id.
  std::vector<IdleWorker> Offers(v1::DeviceKind device) const;

  // Workers sorted by id, after `after_id` (exclusive; "" from the first), at most
  // `limit` of them, keeping those `keep` accepts. `*more` says whether any are left.
  std::vector<v1::WorkerInfo> List(const std::string& after_id, size_t limit,
                                   absl::FunctionRef<bool(const v1::WorkerInfo&)> keep,
                                   bool* more) const;
  std::vector<v1::WorkerInfo> List() const;  // every worker, sorted by id
  absl::StatusOr<v1::WorkerInfo> Get(const std::string& worker_id) const;
  size_t size() const;
  // The oldest last heartbeat among workers not lost, as an age (zero without any).
  absl::Duration OldestHeartbeatAge() const;
  // How many workers are in each (state, device) (for the metrics).
  std::map<std::pair<v1::WorkerState, v1::DeviceKind>, int64_t> CountByStateAndDevice() const;

  // Ends every session; with `last`, once that message (the coordinator's farewell) is
  // sent on it.
  void CloseAllSessions(const std::optional<v1::CoordinatorMessage>& last = std::nullopt);

 private:
  struct Worker {
    v1::WorkerInfo info;
    absl::Time last_heartbeat;
    absl::Time lost_since;
    std::shared_ptr<SessionOutbox> outbox;  // null without a live session
    // Unread(): what the outbox had taken when a message was first seen waiting, and when.
    uint64_t taken_seen = 0;
    std::optional<absl::Time> waiting_since;
    // Unread(), for a worker whose heartbeats count what it read (this session's):
    // what its session wrote that it has not said it read.
    bool counts_reads = false;
    UnreadMessages unread_messages;
    // DRAINING's abort, not yet queued on a session (Drain).
    std::optional<v1::CoordinatorMessage> owed_abort;
    // It said it is shutting down (MarkStopping): never IDLE again until it registers anew.
    bool stopping = false;
  };
  absl::StatusOr<Registration> AddOrReplace(const v1::RegisterWorkerRequest& request,
                                            std::shared_ptr<SessionOutbox>* replaced);
  Worker* Find(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void MarkStoppingLocked(Worker& worker);
  // Unread()'s judgement of one worker, given what its session has delivered by `now`.
  static bool LeavesUnread(Worker& worker, const SessionOutbox::Delivery& delivery, absl::Time now,
                           absl::Duration timeout);
  // Clears the worker's job, attempt and rank, and any abort owed to it.
  static void Unassign(Worker& worker);
  void Touch(Worker& worker) const;

  const Options options_;
  mutable absl::Mutex mu_;
  absl::btree_map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  // Quarantines of workers not registered yet (Quarantine): until and reason.
  absl::btree_map<std::string, std::pair<absl::Time, std::string>> awaited_quarantines_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WORKER_REGISTRY_H_
