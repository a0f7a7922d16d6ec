#include "worker/fsdp/gradient_reducer.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardwise::fsdp {

void GradientReducer::Reduce(FlatUnit& unit, std::function<void()> release_parameters) {
  // DDP's hooks keep the reduction thread: their one-rank all-reduce runs on its stream.
  if (ReducesInPlace(*context_.plan) && hook_.hook() == v1::CommHook::NO_HOOK) {
    ReduceOnTrainingThread(unit);
    return;
  }
  // The previous unit's reduction ends first: at most two units' unsharded gradients
  // live at once, this one and the next one's, computing meanwhile (the bound
  // contracts/memory_estimate.cc counts). Without it a reduction that falls behind holds
  // a third (measured: NO_SHARD's GPT gradients 21.8 MiB against 18.8 estimated).
  OrderAfterPreviousReduction();
  if (IsMixedPrecisionHook(hook_)) {
    auto grad = std::make_shared<Buffer>(std::move(unit.full_grad));
    previous_ = EnqueueAfterFence(context_.device, *lane_,
                                  [this, &unit, grad, release = std::move(release_parameters)] {
                                    if (delay_) delay_();
                                    return StartMixedPrecision(unit, *grad, release);
                                  });
    return;
  }
  // In two parts, as the all-gathers: the reduction enqueued on the reduction stream, then
  // its completion watched on the reduction thread. The unsharded gradient stays this
  // thread's: freed once its stream has waited for the reduction (the next call).
  previous_grad_ = std::move(unit.full_grad);
  Buffer* grad = &previous_grad_;
  const Groups groups = context_.groups;
  previous_ = EnqueueAfterFenceInTwoParts(
      context_.device, *lane_,
      [this, &unit, grad, hook = hook_] {
        if (delay_) delay_();
        return ReduceAndAccumulate(unit, *grad, hook);
      },
      [groups] { return ReductionCollectivesCompleted(groups); });
}

// This thread's stream waits on the device for the reduction queued last (and so for
// every one before it, on the reduction stream), whose unsharded gradient then goes back
// to this thread's pool: whatever reuses it is ordered after. The host waits only until
// the reduction is enqueued. A failure is Finish()'s to report (a task that failed
// synchronised its stream first).
void GradientReducer::OrderAfterPreviousReduction() {
  if (!previous_.valid()) return;
  const absl::StatusOr<CommThread::Fence> reduced = previous_.WaitStarted();
  if (reduced.ok()) context_.device->WaitForFence(reduced->get());
  previous_grad_.Reset();
  // A mixed-precision hook's task (one part) has ended when WaitStarted returns; a
  // two-part task's completion is the reduction thread's to watch.
  previous_ = CommThread::Handle();
}

// One rank has nothing to communicate, so nothing to overlap: FSDP's reduction (the
// rounding to reduce_dtype, the accumulation, an overlapped optimizer step) is enqueued on
// the training thread's own stream, in order, without a thread hop or a host wait.
void GradientReducer::ReduceOnTrainingThread(FlatUnit& unit) {
  Buffer grad = std::move(unit.full_grad);
  const absl::Status reduced = ReduceAndAccumulate(unit, grad, hook_);
  if (inline_status_.ok()) inline_status_ = reduced;
}

absl::Status GradientReducer::ReduceAndAccumulate(FlatUnit& unit, Buffer& grad,
                                                  const v1::CommHook& hook) {
  Device* device = context_.device;
  // On one rank the unsharded gradient is reduced where it lies (no collective, no copy).
  const bool in_place = ReducesInPlace(*context_.plan);
  Buffer scratch;
  if (!in_place) {
    scratch = Buffer(device->allocator(), unit.shard_numel, MemoryCategory::kCommunication, false);
  }
  float* reduced = in_place ? grad.data() : scratch.data();
  RETURN_IF_ERROR(ReduceUnitGradient(hook, context_, grad.data(), unit.shard_numel, reduced));
  device->Accumulate(unit.shard_grad.data(), reduced, unit.shard_numel);
  Step(unit);
  // `scratch` is this thread's stream's: freed now, it is reused only by later work on
  // the same stream.
  return device->status();
}

// DDP's mixed-precision hook: the all-reduce here, then on its own thread the division
// by N, the upcast into the gradient shard and the release of the unit's low-precision
// parameters (the FP32 ones are used again from the next forward).
absl::Status GradientReducer::StartMixedPrecision(FlatUnit& unit, Buffer& grad,
                                                  const std::function<void()>& release_parameters) {
  ASSIGN_OR_RETURN(Bucket bucket, MixedPrecisionAllReduce(context_, grad.data(), unit.shard_numel));
  grad.Reset();
  auto shared = std::make_shared<Bucket>(std::move(bucket));
  absl::MutexLock lock(&mu_);
  upcasts_.push_back(std::async(std::launch::async, [this, &unit, shared, release_parameters] {
    Device* device = context_.device;
    // Beside the reduction thread, on its stream (the bucket was made there).
    device->UseCommunicationStream(Device::CommLane::kReduction);
    Buffer reduced(device->allocator(), unit.shard_numel, MemoryCategory::kCommunication, false);
    MixedPrecisionFinish(context_, *shared, reduced.data());
    device->Accumulate(unit.shard_grad.data(), reduced.data(), unit.shard_numel);
    device->Synchronize().IgnoreError();  // errors stay sticky: Finish sees them
    release_parameters();
  }));
  return absl::OkStatus();
}

void GradientReducer::Step(FlatUnit& unit) {
  if (optimizer_ == nullptr) return;
  bool any = false;
  for (const ShardRange& range : (*ranges_)[unit.index]) any = any || range.in_backward;
  if (!any) return;
  {
    absl::MutexLock lock(&mu_);
    if (!step_begun_) {
      optimizer_->BeginStep();
      step_begun_ = true;
    }
  }
  float* grad = unit.shard_grad.data();
  for (const ShardRange& range : (*ranges_)[unit.index]) {
    if (!range.in_backward) continue;
    optimizer_->UpdateRange(unit.index, unit.shard_numel, range.begin, range.end, unit.shard.data(),
                            grad, range.decay);
    // Stepped: the gradient is consumed (IN_BACKWARD drops it; after HOOK_THEN_OPTIMIZER
    // nothing else reads it before the next zero_grad).
    context_.device->Zero(grad + range.begin, (range.end - range.begin) * sizeof(float));
  }
}

absl::Status GradientReducer::Finish() {
  absl::Status inline_status = std::exchange(inline_status_, absl::OkStatus());
  // The compute stream follows the last reduction on the device; the host then waits for
  // every reduction's completion, where their errors surface (docs/semantics.md, "The end
  // of backward on GPUs").
  OrderAfterPreviousReduction();
  const absl::Status reduced = lane_->Drain();
  std::vector<std::future<void>> upcasts;
  {
    absl::MutexLock lock(&mu_);
    upcasts.swap(upcasts_);
  }
  absl::Status upcast_status;
  for (std::future<void>& upcast : upcasts) {
    try {
      upcast.get();
    } catch (const std::bad_alloc& failure) {
      if (upcast_status.ok()) upcast_status = AllocationFailureStatus(failure);
    }
  }
  RETURN_IF_ERROR(inline_status);
  RETURN_IF_ERROR(reduced);
  RETURN_IF_ERROR(upcast_status);
  return context_.device->status();
}

bool GradientReducer::TakeStepBegun() {
  absl::MutexLock lock(&mu_);
  const bool begun = step_begun_;
  step_begun_ = false;
  return begun;
}

}  // namespace shardwise::fsdp
