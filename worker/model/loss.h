#ifndef SHARDWISE_WORKER_MODEL_LOSS_H_
#define SHARDWISE_WORKER_MODEL_LOSS_H_

// The loss after the last stage: mean cross-entropy over the rows (the MLP's classes, the
// GPT's vocabulary at every position) or mean squared error (MLP), times a scale (1/A for
// A accumulation micro-steps, and the loss scaler's scale). It consumes the final output
// and starts the backward with its gradient.

#include <memory>

#include "proto/job_spec.pb.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class Loss {
 public:
  virtual ~Loss() = default;
  // Writes the batch's loss times `scale` to `loss` (one double of the device's memory,
  // not waited for); flow.hidden (the output) becomes flow.grad, rounded.
  virtual void Compute(const StageContext& context, Flow& flow, float scale, double* loss) = 0;
};

std::unique_ptr<Loss> MakeLoss(v1::Loss loss);

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_LOSS_H_
