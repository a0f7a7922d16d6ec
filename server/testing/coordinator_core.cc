#include "server/testing/coordinator_core.h"

#include <utility>

namespace shardwise {
namespace testing {

void CoordinatorCore::Reset() {
  controller.reset();
  rendezvous.reset();
  workers.reset();
  jobs.reset();
  store.reset();
}

absl::StatusOr<CoordinatorCore> OpenCoordinatorCore(const std::string& state_file,
                                                    const CoordinatorCoreOptions& options) {
  CoordinatorCore core;
  auto store = StateStore::Open(state_file);
  if (!store.ok()) return store.status();
  core.store = std::move(*store);
  auto jobs = JobManager::Create(core.store.get(), {.clock = options.clock});
  if (!jobs.ok()) return jobs.status();
  core.jobs = std::move(*jobs);
  WorkerRegistry::Options registry_options = options.registry;
  registry_options.clock = options.clock;
  core.workers = std::make_unique<WorkerRegistry>(registry_options);
  core.rendezvous = std::make_unique<RendezvousStore>();
  JobController::Options controller_options = options.controller;
  controller_options.clock = options.clock;
  core.controller = std::make_unique<JobController>(core.jobs.get(), core.workers.get(),
                                                    core.rendezvous.get(), controller_options);
  return core;
}

}  // namespace testing
}  // namespace shardwise
