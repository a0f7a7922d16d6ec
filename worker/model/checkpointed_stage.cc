#include "worker/model/checkpointed_stage.h"

namespace shardwise::model {

void CheckpointedStage::Forward(const StageContext& context, Flow& flow) {
  input_ = context.ActivationsLike(flow.hidden);
  context.device->Copy(input_.as<void>(), flow.hidden.as<void>(), flow.hidden.bytes());
  inner_->Forward(context, flow);
  inner_->DropSaved();
}

void CheckpointedStage::Backward(const StageContext& context, Flow& flow) {
  Flow replay;
  replay.hidden = std::move(input_);
  inner_->Forward(context, replay);
  replay.hidden.Reset();  // the output again; only what the forward kept is needed
  inner_->Backward(context, flow);
}

void CheckpointedStage::DropSaved() {
  input_.Reset();
  inner_->DropSaved();
}

}  // namespace shardwise::model
