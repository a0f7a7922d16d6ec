#ifndef SHARDWISE_WORKER_FSDP_GRADIENT_REDUCER_H_
#define SHARDWISE_WORKER_FSDP_GRADIENT_REDUCER_H_

// FSDP's post-backward reduction of each unit (docs/semantics.md "Gradient reduction"), on the
// reduction thread (FSDP's post-backward stream): queued at the unit's post-backward, it
// overlaps the backward of the unit before it. One reduction at a time, which bounds the
// gradients held: Reduce orders the training thread's stream after the previous one, on
// the device where the collectives are stream-ordered (NCCL: the host waits only until it
// is enqueued, as FSDP2's compute stream waits for the last reduce-scatter's event), and
// then frees its unsharded gradient. On one rank without a communication hook, with
// nothing to communicate, it runs on the training thread's stream instead, in order,
// without host waits. Each task reduces the unit's unsharded gradient as the
// communication hook says (comm_hooks.h), adds it into the gradient shard, and with
// optimizer overlap steps the unit's ranges that step in backward. DDP's mixed-precision
// hook finishes on a thread per unit (divide, upcast, free the low-precision parameters).
// Finish(), the end of backward, orders the stream after the last reduction and waits for
// all of them to complete, reporting their errors.
//
// Thread-safety: Reduce, Finish and the setters are the training thread's; the state the
// reduction and upcast threads share with it is guarded by mu_.

#include <functional>
#include <future>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/job_spec.pb.h"
#include "worker/comm/comm_thread.h"
#include "worker/fsdp/comm_hooks.h"
#include "worker/fsdp/fenced_tasks.h"
#include "worker/fsdp/flat_unit.h"
#include "worker/fsdp/optimizer.h"
#include "worker/fsdp/optimizer_ranges.h"

namespace shardwise::fsdp {

class GradientReducer {
 public:
  // `lane` (not owned) runs the reductions.
  GradientReducer(const ReductionContext& context, const v1::CommHook& hook, CommThread* lane)
      : context_(context), hook_(hook), lane_(lane) {}

  // The hook, which may change between steps (every rank at the same step).
  void set_hook(const v1::CommHook& hook) { hook_ = hook; }
  const v1::CommHook& hook() const { return hook_; }
  // For tests: called before each reduction (correctness must not depend on timing).
  void set_delay(std::function<void()> delay) { delay_ = std::move(delay); }
  // Optimizer overlap: after a unit's reduction, `optimizer` steps its ranges that step in
  // backward (`ranges`, per unit; both outlive the reducer), zeroing their gradients.
  void StepInBackward(Optimizer* optimizer, const std::vector<std::vector<ShardRange>>* ranges) {
    optimizer_ = optimizer;
    ranges_ = ranges;
  }

  // Queues the reduction of `unit`'s unsharded gradient (moved out of unit.full_grad).
  // `release_parameters` runs once the mixed-precision hook has upcast the gradient.
  void Reduce(FlatUnit& unit, std::function<void()> release_parameters);
  // The end of backward: every queued reduction, then every upcast thread.
  absl::Status Finish();
  // Whether this step's optimizer step began in backward; resets it for the next step.
  bool TakeStepBegun();

 private:
  // Reduces `grad` (a unit's unsharded gradient) into its gradient shard and steps the
  // ranges that step in backward, on the calling thread's stream.
  absl::Status ReduceAndAccumulate(FlatUnit& unit, Buffer& grad, const v1::CommHook& hook);
  void ReduceOnTrainingThread(FlatUnit& unit);
  void OrderAfterPreviousReduction();
  absl::Status StartMixedPrecision(FlatUnit& unit, Buffer& grad,
                                   const std::function<void()>& release_parameters);
  void Step(FlatUnit& unit);

  const ReductionContext context_;
  v1::CommHook hook_;
  CommThread* const lane_;
  std::function<void()> delay_;
  Optimizer* optimizer_ = nullptr;
  const std::vector<std::vector<ShardRange>>* ranges_ = nullptr;

  CommThread::Handle previous_;  // the last reduction queued (Reduce waits for its start)
  Buffer previous_grad_;         // its unsharded gradient (mixed-precision hook: the task's)
  absl::Status inline_status_;   // the first error of this step's ReduceOnTrainingThread

  absl::Mutex mu_;
  std::vector<std::future<void>> upcasts_ ABSL_GUARDED_BY(mu_);
  bool step_begun_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_GRADIENT_REDUCER_H_
