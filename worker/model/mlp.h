#ifndef SHARDWISE_WORKER_MODEL_MLP_H_
#define SHARDWISE_WORKER_MODEL_MLP_H_

// The MLP's stage: one Linear and the activation after it (none after the last).

#include "proto/job_spec.pb.h"
#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class MlpLayer final : public Stage {
 public:
  // `first`: no input gradient is needed; `last`: no activation follows.
  MlpLayer(Linear linear, v1::Activation activation, bool first, bool last)
      : linear_(linear), activation_(activation), first_(first), last_(last) {}

  void Forward(const StageContext& context, Flow& flow) override;
  void Backward(const StageContext& context, Flow& flow) override;
  void DropSaved() override;

 private:
  const Linear linear_;
  const v1::Activation activation_;
  const bool first_, last_;
  Buffer input_;   // the layer's input [rows, in]
  Buffer preact_;  // its output before the activation [rows, out] (not the last layer)
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_MLP_H_
