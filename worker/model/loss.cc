#include "worker/model/loss.h"

#include <utility>

namespace shardwise::model {
namespace {

class ModelLoss final : public Loss {
 public:
  explicit ModelLoss(v1::Loss kind) : kind_(kind) {}

  void Compute(const StageContext& context, Flow& flow, float scale, double* loss) override {
    const DeviceBatch& batch = *context.batch;
    // Classes (MLP), the vocabulary (GPT) or the outputs (MSE): the last dimension.
    const int64_t width = static_cast<int64_t>(flow.hidden.numel()) / batch.rows;
    // The gradient is written over the logits (or predictions), which nothing reads
    // after the loss: one vocabulary-wide buffer, not two.
    flow.grad = std::move(flow.hidden);
    const TensorRef values = flow.grad.ref();
    if (kind_ == v1::MSE) {
      context.device->MeanSquaredError(values, batch.targets.data(), batch.rows, width, scale,
                                       values, loss);
    } else {
      context.device->CrossEntropy(values, batch.labels.as<int64_t>(), batch.rows, width, scale,
                                   values, loss);
    }
    context.Round(flow.grad);
  }

 private:
  const v1::Loss kind_;
};

}  // namespace

std::unique_ptr<Loss> MakeLoss(v1::Loss loss) { return std::make_unique<ModelLoss>(loss); }

}  // namespace shardwise::model
