#include "worker/testing/threaded_training.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/hash_store.h"
#include "worker/comm/data_plane.h"

namespace shardwise::testing {

absl::StatusOr<ThreadedTraining> TrainInThreads(const v1::JobSpec& job_spec,
                                                const ThreadedOptions& options) {
  // Tests train configuration after configuration, and run again, into the same files:
  // these runs own their outputs unless told otherwise (final_model_owner_test).
  v1::JobSpec spec = job_spec;
  if (options.owns_outputs) spec.mutable_output()->set_overwrite(true);
  gloo::rendezvous::HashStore store;
  const int world = spec.world_size();
  ThreadedTraining out;
  out.memory.resize(world);
  std::vector<absl::StatusOr<TrainingResult>> results(world, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto context = ConnectGlooContext(store, r, world, {});
      // As the worker's attempt runner does: no rank starts training (and so cannot fail
      // and close its sockets) before every rank has finished connecting.
      if (context.ok()) {
        auto verified = VerifyDataPlane(*context);
        if (!verified.ok()) context = verified.status();
      }
      if (!context.ok()) {
        results[r] = context.status();
        return;
      }
      CpuCachingAllocator allocator;
      TrainingContext training;
      training.job_id = options.job_id;
      training.attempt = options.attempt;
      training.init_checkpoint_step = options.init_checkpoint_step;
      HookSchedule hooks;
      for (const auto& [step, hook] : options.hook_switches) hooks.AddCommitted(step, hook);
      training.hook_schedule = &hooks;
      training.rank = r;
      training.world_size = world;
      training.store = &store;
      training.world = *context;
      training.allocator = &allocator;
      training.make_device = options.make_device;
      if (r == 0) {
        training.on_progress = [&](const v1::Progress& p) {
          out.rank0_losses.push_back(p.loss());
          out.rank0_loss_steps.push_back(p.loss_step());
          out.rank0_last_progress = p;
        };
        training.on_execution_order = [&](const v1::ExecutionOrder& order, int64_t, bool changed) {
          if (!changed) out.rank0_order = order;
        };
      }
      TrainingFaults faults = options.faults ? options.faults(r) : TrainingFaults{};
      results[r] = Train(spec, training, &faults);
      if (results[r].ok()) out.memory[r] = results[r]->device_memory;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    if (!results[r].ok()) {
      return absl::Status(results[r].status().code(),
                          absl::StrCat("rank ", r, ": ", results[r].status().message()));
    }
  }
  out.rank0 = *results[0];
  return out;
}

}  // namespace shardwise::testing
