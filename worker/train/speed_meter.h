#ifndef SHARDWISE_WORKER_TRAIN_SPEED_METER_H_
#define SHARDWISE_WORKER_TRAIN_SPEED_METER_H_

// A rank's training speed (steps/s and tokens/s), as progress reports and the job's
// summary show it: measured from the end of the first step this rank trained, because
// that step builds what later steps reuse (a GPU's cuDNN graphs and GEMM plans, the
// caching allocator's pools, the prefetch plan) and would otherwise weigh on a short job's
// figure; PyTorch's benchmarks leave their warm-up steps out the same way. Until a second
// step ends, the first step's own speed (from the start of training). Time is passed in.

#include <cstdint>

#include "absl/time/time.h"

namespace shardwise {

class SpeedMeter {
 public:
  // Training starts at `start` with `steps` steps already done (a checkpoint's, or the
  // live ranks' for a replacement).
  SpeedMeter(absl::Time start, int64_t steps) : start_(start), first_step_(steps) {}

  // A step ended at `now`, `steps` steps done in all.
  void StepEnded(absl::Time now, int64_t steps);

  double steps_per_second() const { return steps_per_second_; }
  double tokens_per_second(int64_t tokens_per_step) const {
    return steps_per_second_ * static_cast<double>(tokens_per_step);
  }

 private:
  static double Rate(int64_t steps, absl::Duration elapsed);

  const absl::Time start_;
  const int64_t first_step_;
  absl::Time warm_since_;    // the end of the first step trained
  int64_t warm_steps_ = -1;  // steps done then; -1 before it ended
  int64_t last_steps_ = -1;  // steps done at the latest StepEnded
  double steps_per_second_ = 0;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_SPEED_METER_H_
