// The coordinator's stateful core as server/main.cc wires it (the state file, the jobs, the
// worker registry, the rendezvous store and the controller over them), for tests that drive
// the real controller without a coordinator process: the controller's own tests, the
// services' tests over real gRPC, and the coordinator fuzzer. One place builds it, so a new
// manager the controller needs is added here once.

#ifndef SHARDWISE_SERVER_TESTING_COORDINATOR_CORE_H_
#define SHARDWISE_SERVER_TESTING_COORDINATOR_CORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/rendezvous_store.h"
#include "server/state_store.h"
#include "server/worker_registry.h"

namespace shardwise {
namespace testing {

struct CoordinatorCore {
  // Declared in the order they are built: the controller, which holds the others, goes
  // first when the core is destroyed.
  std::unique_ptr<StateStore> store;
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<WorkerRegistry> workers;
  std::unique_ptr<RendezvousStore> rendezvous;
  std::unique_ptr<JobController> controller;

  // Destroys the parts, the controller first, as the destructor does (an assignment would
  // destroy the store first), so that a test can open another core in its place.
  void Reset();
};

struct CoordinatorCoreOptions {
  // The clock of every part (the controller's, the jobs', the registry's).
  const Clock* clock = &Clock::Real();
  // Its clock is set from `clock`; check_paths is false unless a test sets it (specs in
  // tests name files that do not exist).
  JobController::Options controller = UncheckedPaths();
  // Its clock is set from `clock`.
  WorkerRegistry::Options registry;

 private:
  static JobController::Options UncheckedPaths() {
    JobController::Options options;
    options.check_paths = false;
    return options;
  }
};

// Opens the state file at `state_file` as it is (a test removes it first for a fresh
// coordinator; opening it again is a coordinator restarting over it), with no worker known.
absl::StatusOr<CoordinatorCore> OpenCoordinatorCore(const std::string& state_file,
                                                    const CoordinatorCoreOptions& options);

}  // namespace testing
}  // namespace shardwise

#endif  // SHARDWISE_SERVER_TESTING_COORDINATOR_CORE_H_
