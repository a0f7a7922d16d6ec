#ifndef SHARDWISE_WORKER_MODEL_NORM_STAGE_H_
#define SHARDWISE_WORKER_MODEL_NORM_STAGE_H_

// A model's final norm as a stage of its own: the GPT's LayerNorm (transformer.ln_f), the
// Llama's RMSNorm (model.norm). `Norm` is LayerNorm or RmsNorm: Forward(context, x, rows,
// &saved) and Backward(context, x, saved, dy, rows).

#include "worker/model/stage.h"

namespace shardwise::model {

template <typename Norm>
class NormStage final : public Stage {
 public:
  explicit NormStage(Norm norm) : norm_(norm) {}

  void Forward(const StageContext& context, Flow& flow) override {
    Buffer y = norm_.Forward(context, flow.hidden.ref(), context.batch->rows, &saved_);
    input_ = std::move(flow.hidden);
    flow.hidden = std::move(y);
  }

  void Backward(const StageContext& context, Flow& flow) override {
    flow.grad = norm_.Backward(context, input_.ref(), saved_, flow.grad.ref(), context.batch->rows);
    DropSaved();
  }

  void DropSaved() override {
    input_.Reset();
    saved_ = {};
  }

 private:
  const Norm norm_;
  Buffer input_;
  typename Norm::Saved saved_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_NORM_STAGE_H_
