#ifndef SHARDWISE_SERVER_JOB_CONTROLLER_H_
#define SHARDWISE_SERVER_JOB_CONTROLLER_H_

// The lifecycle of jobs across workers: validates and admits jobs, gang-schedules them
// onto idle workers, follows every rank's reports, and ends, re-queues or cancels an
// attempt when a rank finishes, fails or is lost. It is the only component that changes
// more than one manager, and it does so under one mutex, so the managers' own locks are
// always leaves and their states never disagree halfway through a decision.
//
// Thread-safety: all methods may be called from any thread.

#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/job_spec_validation.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"
#include "server/job_manager.h"
#include "server/rendezvous_store.h"
#include "server/worker_registry.h"

namespace shardwise {

class JobController {
 public:
  struct Options {
    JobLimits limits;
    bool check_paths = true;  // check that files named by specs exist, here
    absl::Duration heartbeat_interval = absl::Seconds(1);
    absl::Duration heartbeat_timeout = absl::Seconds(10);
    absl::Duration collective_timeout = absl::Seconds(60);
  };

  // The managers are not owned and must outlive the controller.
  JobController(JobManager* jobs, WorkerRegistry* workers, RendezvousStore* rendezvous,
                const Options& options);

  // Client operations.
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);

  // Worker operations.
  v1::RegisterWorkerResponse RegisterWorker(const v1::RegisterWorkerRequest& request);
  absl::StatusOr<std::shared_ptr<SessionOutbox>> OpenSession(const std::string& worker_id);
  void CloseSession(const std::string& worker_id, const std::shared_ptr<SessionOutbox>& outbox);
  void OnHeartbeat(const std::string& worker_id, const v1::Heartbeat& heartbeat);
  void OnReport(const std::string& worker_id, const v1::AttemptReport& report);

  // Marks workers silent for longer than the heartbeat timeout as lost. Called
  // periodically by the coordinator.
  void CheckHeartbeats();

  // Starts every pending job that fits on idle workers now.
  void Schedule();

 private:
  // Ranks of a live attempt that have joined the data plane and finished their work.
  struct LiveAttempt {
    int32_t attempt = 0;
    std::set<int32_t> joined;
    std::set<int32_t> completed;
    std::string result;  // rank 0's final message
  };

  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoseWorkerLocked(const std::string& worker_id, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells every rank of the attempt to stop, except `skip_worker` (already gone).
  void AbortRanksLocked(const v1::Job& job, const std::string& reason,
                        const std::string& skip_worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An attempt failed: re-queue the job if its restart policy allows, else fail it.
  void FailAttemptLocked(const v1::Job& job, const std::string& reason,
                         const std::string& lost_worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndAttemptLocked(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  RendezvousStore* const rendezvous_;
  const Options options_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, LiveAttempt> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_CONTROLLER_H_
