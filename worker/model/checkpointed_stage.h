#ifndef SHARDWISE_WORKER_MODEL_CHECKPOINTED_STAGE_H_
#define SHARDWISE_WORKER_MODEL_CHECKPOINTED_STAGE_H_

// Activation checkpointing (torch.utils.checkpoint on a block): the forward keeps only
// the stage's input; the backward runs the forward again from it, then the backward. The
// recomputation is deterministic, so the gradients are the same, bit for bit, as without
// checkpointing; the memory of the stage's activations is held only during its backward.

#include <memory>

#include "worker/model/stage.h"

namespace shardwise::model {

class CheckpointedStage final : public Stage {
 public:
  explicit CheckpointedStage(std::unique_ptr<Stage> inner) : inner_(std::move(inner)) {}
  void Forward(const StageContext& context, Flow& flow) override;
  void Backward(const StageContext& context, Flow& flow) override;
  void DropSaved() override;

 private:
  const std::unique_ptr<Stage> inner_;
  Buffer input_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_CHECKPOINTED_STAGE_H_
