#ifndef SHARDWISE_WORKER_TESTING_THREADED_TRAINING_H_
#define SHARDWISE_WORKER_TESTING_THREADED_TRAINING_H_

// Runs every rank of a job as a thread of the test process, each with its own allocator,
// over real Gloo/TCP on loopback and an in-memory rendezvous: the real trainer, without
// the coordinator. For tests.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"
#include "worker/runtime/memory.h"
#include "worker/testing/training_faults.h"
#include "worker/train/trainer.h"

namespace shardwise::testing {

struct ThreadedTraining {
  TrainingResult rank0;
  std::vector<double> rank0_losses;       // the loss reported after every step
  std::vector<int64_t> rank0_loss_steps;  // and the steps done when it was measured
  v1::Progress rank0_last_progress;
  v1::ExecutionOrder rank0_order;   // the first micro-step's execution order
  std::vector<MemoryStats> memory;  // per rank: its device allocator's, at the end
};

struct ThreadedOptions {
  std::string job_id = "job-test";
  std::string job_uid;  // Job.uid; empty: a job without one
  int attempt = 1;
  std::optional<int64_t> init_checkpoint_step;  // TrainingContext's
  std::optional<int64_t> own_checkpoint_step;   // TrainingContext's
  // Each rank's fault injection (none if unset).
  std::function<TrainingFaults(int rank)> faults;
  // Communication-hook switches every rank knows as agreed from the start: (step, hook).
  std::vector<std::pair<int64_t, v1::CommHook>> hook_switches;
  // For jobs on an accelerator (spec.device): each rank's device and communicators.
  RankDeviceFactory make_device;
  // Each rank's own view of the spec (a host that holds another copy of a file), made
  // from the job's; unset: the job's, the same for every rank.
  std::function<void(int rank, v1::JobSpec* spec)> rank_spec;
  // Whether the run replaces whatever is at the spec's output paths (tests train into the
  // same files again and again); false keeps the spec's output.overwrite as written.
  bool owns_outputs = true;
};

// If any rank failed: the first rank's error that is not UNAVAILABLE (a peer's closed
// connection), else the first rank's, followed by the other failing ranks'.
absl::StatusOr<ThreadedTraining> TrainInThreads(const v1::JobSpec& spec,
                                                const ThreadedOptions& options = {});

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_THREADED_TRAINING_H_
