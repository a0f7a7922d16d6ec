#include "worker/fsdp/grad_scaler.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace shardwise::fsdp {

GradScaler::GradScaler(const v1::GradScaler& spec)
    : enabled_(spec.enabled()),
      growth_factor_(spec.has_growth_factor() ? spec.growth_factor() : 2.0),
      backoff_factor_(spec.has_backoff_factor() ? spec.backoff_factor() : 0.5),
      growth_interval_(spec.has_growth_interval() ? spec.growth_interval() : 2000),
      scale_(static_cast<float>(spec.has_init_scale() ? spec.init_scale() : 65536.0)) {}

float GradScaler::inverse_scale() const {
  return static_cast<float>(1.0 / static_cast<double>(scale()));
}

void GradScaler::Update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    scale_ = static_cast<float>(scale_ * backoff_factor_);
    growth_tracker_ = 0;
    ++skipped_steps_;
    return;
  }
  if (++growth_tracker_ == growth_interval_) {
    // Past FP32's largest, every later step would be skipped (the loss times infinity).
    const float grown = static_cast<float>(scale_ * growth_factor_);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
}

v1::GradScalerState GradScaler::State() const {
  v1::GradScalerState state;
  state.set_scale(scale());
  state.set_skipped_steps(skipped_steps_);
  state.set_growth_tracker(growth_tracker_);
  return state;
}

absl::Status GradScaler::Restore(const v1::GradScalerState& state) {
  if (state.scale() <= 0) return absl::OkStatus();              // not a scaler's state (no scaling)
  if (!(state.scale() <= std::numeric_limits<float>::max())) {  // NaN too
    return absl::DataLossError(
        absl::StrCat("grad_scaler.scale is ", state.scale(), ", not a loss scale FP32 holds"));
  }
  if (state.skipped_steps() < 0 || state.growth_tracker() < 0) {
    return absl::DataLossError(absl::StrCat("grad_scaler.skipped_steps ", state.skipped_steps(),
                                            " or growth_tracker ", state.growth_tracker(),
                                            " is negative"));
  }
  scale_ = static_cast<float>(state.scale());
  skipped_steps_ = state.skipped_steps();
  growth_tracker_ = state.growth_tracker();
  return absl::OkStatus();
}

}  // namespace shardwise::fsdp
