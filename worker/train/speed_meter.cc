#include "worker/train/speed_meter.h"

namespace shardwise {

double SpeedMeter::Rate(int64_t steps, absl::Duration elapsed) {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  return seconds > 0 && steps > 0 ? static_cast<double>(steps) / seconds : 0;
}

void SpeedMeter::StepEnded(absl::Time now, int64_t steps) {
  // A step redone after a recovery ends no new step: the figure stands (the recovery's
  // time counts once the next new step ends).
  if (steps <= last_steps_) return;
  last_steps_ = steps;
  if (warm_steps_ < 0) {
    warm_since_ = now;
    warm_steps_ = steps;
    steps_per_second_ = Rate(steps - first_step_, now - start_);
    return;
  }
  steps_per_second_ = Rate(steps - warm_steps_, now - warm_since_);
}

}  // namespace shardwise
