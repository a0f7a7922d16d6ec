#ifndef SHARDWISE_SERVER_COORDINATOR_H_
#define SHARDWISE_SERVER_COORDINATOR_H_

// The coordinator process: owns the managers, serves the three services (plus gRPC's
// health and reflection services) and its metrics, and runs the periodic work (failure
// detection, progress and unsaved changes to the state file, compaction).
//
// Threads (docs/architecture.md, "Threads"): gRPC's own (its pollers and callback
// threads, and a bounded pool for the synchronous JobService and RendezvousService
// calls), the executor (what worker messages ask of the JobController), the watch hub,
// the periodic thread, and the metrics server's small pool. None is per worker.
//
// Lifecycle: Start() opens the state file, recovers jobs, binds and starts serving;
// Wait() blocks until Shutdown() (from another thread or a signal handler's helper);
// destruction stops everything. Members are declared in dependency order.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "common/metrics_http_server.h"
#include "common/monotonic_wait.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"
#include "server/call_pool.h"
#include "server/client_auth.h"
#include "server/coordinator_metrics.h"
#include "server/job_calls.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/job_service.h"
#include "server/rendezvous_service.h"
#include "server/rendezvous_store.h"
#include "server/serial_executor.h"
#include "server/silent_sessions.h"
#include "server/state_file_lock.h"
#include "server/state_store.h"
#include "server/watch_hub.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"

namespace shardwise {

// TLS on the coordinator's port (docs/operations.md, "Security").
struct TlsOptions {
  std::string cert_file;         // the coordinator's certificate chain (PEM); empty: plaintext
  std::string key_file;          // its private key
  std::string worker_ca_file;    // with it, workers must present a certificate it signed
  unsigned reload_seconds = 60;  // how often the files are read again (rotation)
};

struct CoordinatorOptions {
  std::string listen_address = "127.0.0.1:7070";  // port 0 picks a free port
  TlsOptions tls;
  // Who may call JobService (server/client_auth.h); empty: anyone, as an admin.
  std::string tokens_file;
  // Serve a non-loopback address without TLS or tokens (a network trusted otherwise).
  bool insecure = false;
  std::string state_file = "shardwise-state.db";
  std::string metrics_address;  // host:port for /metrics; empty: not served
  // host:port for a plaintext port serving only grpc.health.v1 (Kubernetes' gRPC probes
  // cannot speak TLS); empty: not served. It tells whether the coordinator serves, no more.
  std::string health_address;
  JobController::Options controller;
  WorkerRegistry::Options workers;
  RendezvousStore::Limits rendezvous;
  // Progress reports reach the state file this often (all jobs in one transaction).
  absl::Duration progress_persist_interval = absl::Seconds(1);
  // Jobs that ended longer ago than this are compacted (StateStore); checked hourly.
  absl::Duration job_retention = absl::Hours(24 * 30);
  // Jobs that ended longer ago than this are forgotten (JobManager::Forget), summaries
  // too; checked hourly. Infinite: never.
  absl::Duration forget_jobs_after = absl::InfiniteDuration();
  // Threads gRPC may use for the synchronous calls (rendezvous Set/Get/Add).
  int max_sync_threads = 32;
  // The JobService's calls: the threads that answer them, and how many may wait (CallPool).
  int client_call_threads = 4;
  int max_queued_client_calls = 10000;
  // SubmitJob's own: admitting a job reads the files it names.
  int submission_threads = 2;
  int max_queued_submissions = 1000;
  // WatchJob streams served at once (WatchHub), and of one principal; past either a watch
  // is RESOURCE_EXHAUSTED.
  int max_watches = 10000;
  int max_watches_per_principal = 1000;
  // A watch whose update has waited this long for its client to read it is cancelled.
  absl::Duration watch_write_timeout = absl::Minutes(1);
  // A worker session that has sent no hello this long after it started is ended.
  absl::Duration session_hello_timeout = absl::Seconds(30);
};

// The health service name a liveness probe asks for: SERVING while the process answers,
// whatever the readiness ("") says.
inline constexpr char kLivenessService[] = "liveness";

class Coordinator {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorOptions& options);
  ~Coordinator();

  int port() const { return port_; }
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  int health_port() const { return health_port_; }
  void Shutdown();
  void Wait();
  // After Shutdown and Wait: lets every call finish, then writes what the state file has
  // not taken yet (as the destructor would). DATA_LOSS when a state change could not be
  // written and is lost with this process (each is logged); the process exits non-zero.
  absl::Status Close();

 private:
  explicit Coordinator(const CoordinatorOptions& options) : options_(options) {}
  // Refuses what would expose the coordinator: plaintext or no tokens off loopback.
  static absl::Status CheckExposure(const CoordinatorOptions& options);
  absl::Status StartServing();
  absl::Status StartHealthServer();
  // Both servers' health services answer `serving` for readiness ("").
  void SetServing(bool serving);
  void RunPeriodicWork();
  // Compacts, then forgets, the jobs that ended long ago (the options' bounds), logging
  // what it did.
  void TrimEndedJobs();
  void AddCollectors();
  // At shutdown: the changes the state file refused so far, once more, and the progress;
  // DATA_LOSS naming how many changes are lost.
  absl::Status WriteWhatIsLeft();
  bool closed_ = false;

  const CoordinatorOptions options_;
  MetricsRegistry metrics_registry_;
  CoordinatorMetrics metrics_{&metrics_registry_};
  std::unique_ptr<StateFileLock> state_lock_;  // before the store: released last
  std::unique_ptr<StateStore> state_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<RendezvousStore> rendezvous_;
  std::unique_ptr<SerialExecutor> executor_;  // stopped before the controller goes
  std::unique_ptr<JobController> controller_;
  std::unique_ptr<TokenAuthenticator> tokens_;
  std::unique_ptr<WatchHub> watch_hub_;
  std::unique_ptr<JobCalls> job_calls_;
  std::unique_ptr<CallPool> call_pool_;
  std::unique_ptr<CallPool> submission_pool_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<SilentSessions> silent_sessions_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  // Answers UNIMPLEMENTED to any method but health's on the health port; it also gives
  // that server the callback queue gRPC requires of a server with no service of its own.
  grpc::CallbackGenericService health_port_others_;
  std::unique_ptr<grpc::Server> health_server_;  // --health_address: health only
  int health_port_ = 0;
  std::unique_ptr<MetricsHttpServer> metrics_server_;
  // Its wait is the periodic work's tick: on the monotonic clock, which no one steps.
  MonotonicNotification stopping_;
  std::thread periodic_;
  std::atomic<bool> shut_down_{false};
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_COORDINATOR_H_
