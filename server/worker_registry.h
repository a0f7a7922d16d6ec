#ifndef SHARDWISE_SERVER_WORKER_REGISTRY_H_
#define SHARDWISE_SERVER_WORKER_REGISTRY_H_

// Tracks worker daemons: registration, their one live session, heartbeats, what each is
// doing, and which have gone silent. It decides nothing about jobs: the JobController
// reads it and tells it what changed. Workers are not persisted: after a coordinator
// restart they register again (they retry with backoff).
//
// Thread-safety: all methods may be called from any thread.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"
#include "server/session_outbox.h"

namespace shardwise {

// The memory a worker offers one rank: its GPU's for a CUDA worker, the host's otherwise;
// 0 when it advertises none.
inline int64_t RankMemory(const v1::WorkerInfo& worker) {
  return worker.device() == v1::CUDA ? worker.gpu().memory_bytes() : worker.memory_bytes();
}

class WorkerRegistry {
 public:
  // Registers a worker, or re-registers one under the same name (a restarted or
  // reconnecting daemon); returns its id and the state it had before (UNSPECIFIED if new).
  struct Registration {
    std::string worker_id;
    v1::WorkerInfo previous;
  };
  Registration Register(const v1::RegisterWorkerRequest& request);

  // Makes a new session the worker's live one (closing any older one) and marks the worker
  // alive. NOT_FOUND for an unregistered id.
  absl::StatusOr<std::shared_ptr<SessionOutbox>> AttachSession(const std::string& worker_id);

  // True if `outbox` was the worker's live session (so the worker is now unreachable).
  bool DetachSession(const std::string& worker_id, const std::shared_ptr<SessionOutbox>& outbox);

  // Records a heartbeat; returns the worker as the registry knows it.
  absl::StatusOr<v1::WorkerInfo> Heartbeat(const std::string& worker_id);

  // Queues a message on the worker's live session; false if it has none.
  bool Send(const std::string& worker_id, const v1::CoordinatorMessage& message);

  void SetBusy(const std::string& worker_id, const std::string& job_id, int32_t attempt,
               int32_t rank);
  void SetDraining(const std::string& worker_id);
  void SetIdle(const std::string& worker_id);
  // Marks the worker lost and closes its session; returns it as it was before.
  absl::StatusOr<v1::WorkerInfo> MarkLost(const std::string& worker_id, const std::string& reason);

  // Workers whose last heartbeat is older than `timeout` (and not yet lost).
  std::vector<std::string> Silent(absl::Time now, absl::Duration timeout) const;

  std::vector<v1::WorkerInfo> Idle(v1::DeviceKind device) const;  // sorted by id
  std::vector<v1::WorkerInfo> List() const;                       // sorted by id
  absl::StatusOr<v1::WorkerInfo> Get(const std::string& worker_id) const;

  void CloseAllSessions();

 private:
  struct Worker {
    v1::WorkerInfo info;
    absl::Time last_heartbeat;
    std::shared_ptr<SessionOutbox> outbox;  // null without a live session
  };
  Worker* Find(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WORKER_REGISTRY_H_
