#ifndef SHARDWISE_WORKER_TESTING_TRAINING_FAULTS_H_
#define SHARDWISE_WORKER_TESTING_TRAINING_FAULTS_H_

// Fault injection and hand-made schedules for in-process tests: TrainingHooks
// (worker/train/training_hooks.h) made of plain functions. Worker processes take theirs
// from the --fault_injection flag (worker/train/injected_faults.h).

#include <cstdint>
#include <functional>
#include <set>

#include "worker/train/training_hooks.h"

namespace shardwise {

struct TrainingFaults final : public TrainingHooks {
  // Called on every micro-batch before its forward.
  std::function<void(int64_t step, int micro, MicroBatch* batch)> corrupt_inputs;
  // Steps whose gradients are discarded without an optimizer step (as a loss scaler
  // skips a step), by hand.
  std::set<int64_t> skip_steps;
  // Alters the execution order the rank records at `step` (as if its model ran its units
  // in another order): the coordinator's validation is tested with it.
  std::function<void(int64_t step, v1::ExecutionOrder* order)> alter_execution_order;
  // Called before each stage's compute and before each collective on the communication
  // threads (e.g. random sleeps): correctness must not depend on timing.
  std::function<void()> compute_delay, communication_delay;
  // Called as the rank enters each phase and collective (TrainingHooks::AtPoint).
  std::function<void(int64_t step, const char* point)> at_point;

  void OnMicroBatch(int64_t step, int micro, MicroBatch* batch) override {
    if (corrupt_inputs) corrupt_inputs(step, micro, batch);
  }
  bool SkipStep(int64_t step) override { return skip_steps.count(step) > 0; }
  void AlterExecutionOrder(int64_t step, v1::ExecutionOrder* order) override {
    if (alter_execution_order) alter_execution_order(step, order);
  }
  std::function<void()> ComputeDelay() override { return compute_delay; }
  std::function<void()> CommunicationDelay() override { return communication_delay; }
  void AtPoint(int64_t step, const char* point) override {
    if (at_point) at_point(step, point);
  }
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TESTING_TRAINING_FAULTS_H_
