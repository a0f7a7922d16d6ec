#ifndef SHARDWISE_WORKER_TRAIN_TRAINING_HOOKS_H_
#define SHARDWISE_WORKER_TRAIN_TRAINING_HOOKS_H_

// The seam through which tests fault or shake a rank's training (worker/testing/
// implements it; the worker's --fault_injection flag builds one). Production runs none:
// every method's default does nothing.
//
// Thread-safety: called from the rank's training thread, but the delays and AtPoint,
// which run on its communication threads too.

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "proto/job.pb.h"
#include "worker/data/batch.h"

namespace shardwise {

class TrainingHooks {
 public:
  virtual ~TrainingHooks() = default;
  // Called on every micro-batch before its forward.
  virtual void OnMicroBatch(int64_t step, int micro, MicroBatch* batch) {}
  // Whether step `step`'s gradients are discarded without an optimizer step (as a loss
  // scaler skips a step).
  virtual bool SkipStep(int64_t step) { return false; }
  // Alters the execution order the rank records at `step`.
  virtual void AlterExecutionOrder(int64_t step, v1::ExecutionOrder* order) {}
  // Called before each stage's compute, and before each collective.
  virtual std::function<void()> ComputeDelay() { return nullptr; }
  virtual std::function<void()> CommunicationDelay() { return nullptr; }
  // Called as the rank enters each phase of step `step` ("forward", "commit vote", ...)
  // and each collective ("reduce-scatter", "all-reduce", ...), on the entering thread;
  // and with the checkpoint's step before the rank loads the one it starts from
  // ("loading the checkpoint").
  virtual void AtPoint(int64_t step, const char* point) {}
  // What the rank takes as the outcome of `part` ("checkpoint", "evaluation"), which it has
  // finished after `steps` steps: a test's way to have one rank see a collective fail that
  // completed on its peers, as a ring's last messages lost to it alone would.
  virtual absl::Status AfterPart(int64_t steps, const char* part) { return absl::OkStatus(); }
  // Whether a fault-tolerant rank asks to leave with its group after `step`, as a rank
  // whose worker is shutting down does.
  virtual bool LeaveAfter(int64_t step) { return false; }
  // Whether the rank stays out of its attempt's rendezvous until the attempt is aborted,
  // as a hung worker or one that cannot reach the coordinator's rendezvous would.
  virtual bool StayOutOfRendezvous() { return false; }
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_TRAINING_HOOKS_H_
