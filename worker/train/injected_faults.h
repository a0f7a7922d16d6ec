#ifndef SHARDWISE_WORKER_TRAIN_INJECTED_FAULTS_H_
#define SHARDWISE_WORKER_TRAIN_INJECTED_FAULTS_H_

// The worker's --fault_injection flag (docs/operations.md): the faults that tests of a
// real cluster ask worker processes for, as TrainingHooks. In-process tests fill the same
// seam with functions instead (worker/testing/training_faults.h).

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/train/training_hooks.h"

namespace shardwise {

// "" gives null (no faults); "unit_order_reversed" makes the rank record its FSDP units in
// reverse order at every step, "unit_order_reversed_from=STEP" from step STEP on;
// "never_join_rendezvous" makes the worker take its assignments and never join their
// rendezvous; "sigkill_at=STEP:POINT" kills the worker's process (SIGKILL) as its rank
// enters POINT of step STEP (or of any step: "any"): a phase ("forward", "backward",
// "commit vote", "optimizer", "checkpoint", "final model", "sending optimizer state", ...) or a
// collective ("reduce-scatter", "all-reduce", ...); "no_thread_at=STEP:POINT" throws there,
// once, what std::thread throws on a host out of threads (POINT a phase the training
// thread enters: "forward", "optimizer"); "pause_at=STEP:POINT:MS" stops the
// rank there for MS milliseconds, once; "hold_at=STEP:POINT:FILE" stops it there until
// FILE exists, once (a test's window that the job's end cannot race; FILE holds no
// comma);
// "fail_after=STEPS:PART" makes the rank take PART ("checkpoint", "evaluation"), done
// after STEPS steps (0: the evaluation before the first), as failed (UNAVAILABLE), once,
// though its peers finished it;
// "leave_after=STEP" makes a fault-tolerant rank leave with its group after step STEP,
// as one whose worker is shutting down does. Several faults are joined by commas.
// INVALID_ARGUMENT naming the flag and the fault for anything else.
// `sleep` is how a pause_at fault pauses (a test's, to see that it does, and once).
using PauseFunction = std::function<void(absl::Duration)>;
absl::StatusOr<std::shared_ptr<TrainingHooks>> ParseInjectedFaults(
    const std::string& text,
    const PauseFunction& sleep = [](absl::Duration d) { absl::SleepFor(d); });

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_INJECTED_FAULTS_H_
