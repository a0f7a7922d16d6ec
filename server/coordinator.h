#ifndef SHARDWISE_SERVER_COORDINATOR_H_
#define SHARDWISE_SERVER_COORDINATOR_H_

// The coordinator process: owns the managers, serves the three services (plus gRPC's
// health and reflection services) and runs the failure detector.
//
// Lifecycle: Start() opens the state file, recovers jobs, binds and starts serving;
// Wait() blocks until Shutdown() (from another thread or a signal handler's helper);
// destruction stops everything. Members are declared in dependency order.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/server.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/job_service.h"
#include "server/rendezvous_service.h"
#include "server/rendezvous_store.h"
#include "server/state_file_lock.h"
#include "server/state_store.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"

namespace shardwise {

struct CoordinatorOptions {
  std::string listen_address = "127.0.0.1:7070";  // port 0 picks a free port
  std::string state_file = "shardwise-state.db";
  JobController::Options controller;
  JobManager::Options jobs;
  RendezvousStore::Limits rendezvous;
};

class Coordinator {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorOptions& options);
  ~Coordinator();

  int port() const { return port_; }
  void Shutdown();
  void Wait();

 private:
  explicit Coordinator(const CoordinatorOptions& options) : options_(options) {}
  void DetectFailures();

  const CoordinatorOptions options_;
  std::unique_ptr<StateFileLock> state_lock_;  // before the store: released last
  std::unique_ptr<StateStore> state_;
  std::unique_ptr<JobManager> jobs_;
  WorkerRegistry workers_;
  std::unique_ptr<RendezvousStore> rendezvous_;
  std::unique_ptr<JobController> controller_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Notification stopping_;
  std::thread failure_detector_;
  std::atomic<bool> shut_down_{false};
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_COORDINATOR_H_
