#include "worker/train/pending_losses.h"

#include <algorithm>
#include <cassert>

#include "common/status_macros.h"

namespace shardwise {

int LossReadInterval(const v1::JobSpec& spec) {
  return std::max(1, spec.loss_read_interval_steps());
}

bool LossReadDue(const v1::JobSpec& spec, int64_t steps_done, int pending_steps) {
  if (pending_steps == 0) return false;
  const int64_t checkpoints = spec.output().checkpoint_interval_steps();
  return pending_steps >= LossReadInterval(spec) || steps_done >= spec.steps() ||
         (checkpoints > 0 && steps_done % checkpoints == 0);
}

PendingLosses::PendingLosses(Device* device, int interval, int micro_steps)
    : device_(device),
      interval_(interval),
      micro_steps_(micro_steps),
      slots_(device->allocator(), static_cast<size_t>(interval) * micro_steps,
             MemoryCategory::kActivations, ScalarType::kFloat64, /*zero=*/false) {
  steps_.reserve(interval);
}

double* PendingLosses::Slot(int micro) {
  assert(!full() && micro < micro_steps_);
  return slots_.as<double>() + static_cast<size_t>(size()) * micro_steps_ + micro;
}

void PendingLosses::EndStep(int64_t step, double scale) {
  assert(!full());
  steps_.push_back({step, scale});
}

absl::StatusOr<std::vector<PendingLosses::StepLoss>> PendingLosses::Take() {
  std::vector<double> host(static_cast<size_t>(size()) * micro_steps_);
  RETURN_IF_ERROR(
      device_->CopyToHost(host.data(), slots_.as<double>(), host.size() * sizeof(double)));
  std::vector<StepLoss> losses;
  losses.reserve(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    // The order and arithmetic of a read after every micro-step.
    double local = 0;
    for (int micro = 0; micro < micro_steps_; ++micro) {
      local += host[s * micro_steps_ + micro] / steps_[s].scale;
    }
    losses.push_back({steps_[s].step, local});
  }
  steps_.clear();
  return losses;
}

}  // namespace shardwise
