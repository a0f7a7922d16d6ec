#ifndef SHARDWISE_WORKER_FSDP_LR_SCHEDULE_H_
#define SHARDWISE_WORKER_FSDP_LR_SCHEDULE_H_

// The learning rate of each optimizer step (optimizer.lr_schedule), nanoGPT's get_lr:
// with lr the optimizer's, W warmup steps and decay ending at step D (default: the job's
// steps), step s (0-based) runs with
//   s < W:           lr * (s + 1) / (W + 1)
//   CONSTANT:        lr
//   s >= D:          min_lr
//   otherwise, r = (s - W) / (D - W):
//     COSINE:        min_lr + (lr - min_lr) * (1 + cos(pi * r)) / 2
//     LINEAR:        min_lr + (lr - min_lr) * (1 - r)
// Pure.

#include <cstdint>

#include "proto/job_spec.pb.h"

namespace shardwise::fsdp {

// The optimizer's own lr: sgd.lr, or adamw.lr (default 1e-3).
double BaseLearningRate(const v1::OptimizerSpec& optimizer);

double ScheduledLearningRate(const v1::OptimizerSpec& optimizer, int64_t step, int64_t total_steps);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_LR_SCHEDULE_H_
