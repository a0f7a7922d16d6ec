#ifndef SHARDWISE_BENCH_LOAD_SIM_WORKER_H_
#define SHARDWISE_BENCH_LOAD_SIM_WORKER_H_

// A simulated worker daemon for the load generator: a real gRPC session with the
// coordinator (registration, hello, heartbeats carrying positions, reports), driven by
// gRPC's callback API so that thousands live in one process, and no training. An
// assignment is accepted at once (JOINED and the execution order are reported); the
// "training" is time passing: rank 0 reports progress, and every rank completes once the
// job's steps have elapsed. An abort ends the attempt. Hook-switch proposals are
// accepted.
//
// Thread-safety: gRPC calls the reactions; the load generator's ticker calls Tick().

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/client_callback.h"
#include "proto/worker_service.grpc.pb.h"

namespace shardwise::load {

struct SimOptions {
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration progress_interval = absl::Milliseconds(200);  // rank 0's reports
  absl::Duration step_time = absl::Milliseconds(50);           // one simulated step
  int64_t memory_bytes = int64_t{64} << 30;                    // advertised
};

// What every simulated worker adds to, for the load generator's report.
struct SimCounters {
  std::atomic<int64_t> registered{0};
  std::atomic<int64_t> registration_failures{0};
  std::atomic<int64_t> sessions_ended{0};  // a session the coordinator or the network ended
  std::atomic<int64_t> heartbeats{0};
  std::atomic<int64_t> reports{0};
  std::atomic<int64_t> assignments{0};
  std::atomic<int64_t> aborts{0};

  // The first session that ended early, "worker: CODE: message", so that a failed run
  // says why the coordinator or the network ended it.
  void RecordSessionEnd(const std::string& worker, const grpc::Status& status);
  std::string FirstSessionEnd() const;

 private:
  mutable absl::Mutex mu_;
  std::string first_session_end_ ABSL_GUARDED_BY(mu_);
};

class SimWorker final : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  SimWorker(std::string name, v1::WorkerService::Stub* stub, const SimOptions& options,
            SimCounters* counters, absl::Time first_heartbeat);

  // Registers, then opens the session; asynchronous.
  void Start();
  // Sends what is due at `now`: a heartbeat, rank 0's progress, the completion.
  void Tick(absl::Time now);
  // Ends the session; returns once gRPC is done with this worker.
  void Stop();
  // Stops sending anything, as a frozen process would, with its session left open;
  // returns when it sent its last heartbeat.
  absl::Time Freeze();
  const std::string& name() const { return name_; }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  struct Attempt {
    std::string job_id;
    int32_t attempt = 0;
    int32_t rank = 0;
    int64_t steps = 0;
    absl::Time started;
    absl::Time next_progress;
  };

  void OpenSession();
  void OnAssignment(const v1::Assignment& assignment);
  void Send(v1::WorkerMessage message) ABSL_LOCKS_EXCLUDED(mu_);
  void QueueLocked(v1::WorkerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::WorkerMessage Report(const Attempt& attempt, v1::AttemptPhase phase, int64_t step) const;

  const std::string name_;
  v1::WorkerService::Stub* const stub_;
  const SimOptions options_;
  SimCounters* const counters_;

  grpc::ClientContext register_context_;
  v1::RegisterWorkerRequest register_request_;
  v1::RegisterWorkerResponse register_response_;
  grpc::ClientContext session_context_;
  v1::CoordinatorMessage incoming_;

  absl::Mutex mu_;
  std::deque<v1::WorkerMessage> outgoing_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool open_ ABSL_GUARDED_BY(mu_) = false;  // the session started and has not ended
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // OnDone ran (or the session never opened)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_heartbeat_ ABSL_GUARDED_BY(mu_);
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_);
  std::optional<Attempt> attempt_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_SIM_WORKER_H_
