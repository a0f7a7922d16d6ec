#include "worker/testing/threaded_training.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/hash_store.h"
#include "worker/comm/data_plane.h"

namespace shardwise::testing {

namespace {

// The failure a test should see: the first rank's that is not UNAVAILABLE (a rank that
// fails closes its sockets, and its peers then fail UNAVAILABLE, in whatever order the
// threads ran), else the first rank's, with its payloads; the other failing ranks' follow
// it in the message.
absl::Status FirstCause(const std::vector<absl::StatusOr<TrainingResult>>& results) {
  int cause = -1;
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    if (results[r].ok()) continue;
    const bool consequence = results[r].status().code() == absl::StatusCode::kUnavailable;
    if (cause < 0 ||
        (!consequence && results[cause].status().code() == absl::StatusCode::kUnavailable)) {
      cause = r;
    }
  }
  if (cause < 0) return absl::OkStatus();
  std::string message = absl::StrCat("rank ", cause, ": ", results[cause].status().message());
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    if (r == cause || results[r].ok()) continue;
    absl::StrAppend(&message, "; also rank ", r, ": ", results[r].status().ToString());
  }
  absl::Status first(results[cause].status().code(), message);
  // What the cause carries besides (its permanence, contracts/permanent_failure.h) too.
  results[cause].status().ForEachPayload([&](absl::string_view type, const absl::Cord& payload) {
    first.SetPayload(type, absl::Cord(std::string(payload)));
  });
  return first;
}

}  // namespace

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
      training.job_uid = options.job_uid;
      training.attempt = options.attempt;
      training.init_checkpoint_step = options.init_checkpoint_step;
      training.own_checkpoint_step = options.own_checkpoint_step;
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
      v1::JobSpec rank_spec = spec;
      if (options.rank_spec) options.rank_spec(r, &rank_spec);
      results[r] = Train(rank_spec, training, &faults);
      if (results[r].ok()) out.memory[r] = results[r]->device_memory;
    });
  }
  for (auto& t : threads) t.join();
  absl::Status failure = FirstCause(results);
  if (!failure.ok()) return failure;
  out.rank0 = *results[0];
  return out;
}

}  // namespace shardwise::testing
