#include "worker/fsdp/lr_schedule.h"

#include <cmath>

namespace shardwise::fsdp {

double BaseLearningRate(const v1::OptimizerSpec& optimizer) {
  if (optimizer.has_sgd()) return optimizer.sgd().lr();
  return optimizer.adamw().has_lr() ? optimizer.adamw().lr() : 1e-3;
}

double ScheduledLearningRate(const v1::OptimizerSpec& optimizer, int64_t step,
                             int64_t total_steps) {
  const double lr = BaseLearningRate(optimizer);
  const v1::LrSchedule& schedule = optimizer.lr_schedule();
  const int64_t warmup = schedule.warmup_steps();
  // In doubles: warmup_steps may be as large as int64 holds.
  if (step < warmup) {
    return lr * (static_cast<double>(step) + 1.0) / (static_cast<double>(warmup) + 1.0);
  }
  if (schedule.decay() == v1::LrSchedule::CONSTANT) return lr;
  const int64_t end = schedule.decay_steps() > 0 ? schedule.decay_steps() : total_steps;
  const double min_lr = schedule.min_lr();
  if (step >= end) return min_lr;
  const double ratio = static_cast<double>(step - warmup) / static_cast<double>(end - warmup);
  const double coefficient = schedule.decay() == v1::LrSchedule::COSINE
                                 ? 0.5 * (1.0 + std::cos(M_PI * ratio))
                                 : 1.0 - ratio;
  return min_lr + coefficient * (lr - min_lr);
}

}  // namespace shardwise::fsdp
