#ifndef SHARDWISE_WORKER_TESTING_TRAINING_FAULTS_H_
#define SHARDWISE_WORKER_TESTING_TRAINING_FAULTS_H_

// Fault injection and hand-made schedules for tests: TrainingHooks (training_hooks.h)
// made of plain functions, and the worker's --fault_injection flag, which tests of a
// real cluster pass to worker processes.

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "worker/training_hooks.h"

namespace shardwise {

struct TrainingFaults final : public TrainingHooks {
  // Called on every micro-batch before its forward.
  std::function<void(int64_t step, int micro, model::MicroBatch* batch)> corrupt_inputs;
  // Steps whose gradients are discarded without an optimizer step (as a loss scaler
  // skips a step), by hand.
  std::set<int64_t> skip_steps;
  // Alters the execution order the rank records at `step` (as if its model ran its units
  // in another order): the coordinator's validation is tested with it.
  std::function<void(int64_t step, v1::ExecutionOrder* order)> alter_execution_order;
  // Called before each stage's compute and before each collective on the communication
  // threads (e.g. random sleeps): correctness must not depend on timing.
  std::function<void()> compute_delay, communication_delay;

  void OnMicroBatch(int64_t step, int micro, model::MicroBatch* batch) override {
    if (corrupt_inputs) corrupt_inputs(step, micro, batch);
  }
  bool SkipStep(int64_t step) override { return skip_steps.count(step) > 0; }
  void AlterExecutionOrder(int64_t step, v1::ExecutionOrder* order) override {
    if (alter_execution_order) alter_execution_order(step, order);
  }
  std::function<void()> ComputeDelay() override { return compute_delay; }
  std::function<void()> CommunicationDelay() override { return communication_delay; }
};

// Fault injection from a worker's --fault_injection flag (docs/operations.md):
// "unit_order_reversed" (every step) or "unit_order_reversed_from=N" (from step N on).
// INVALID_ARGUMENT for anything else.
absl::StatusOr<TrainingFaults> ParseTrainingFaults(const std::string& text);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TESTING_TRAINING_FAULTS_H_
