#include "worker/model/loss.h"

namespace shardwise::model {
namespace {

class CrossEntropyLoss final : public Loss {
 public:
  absl::StatusOr<double> Compute(const StageContext& context, Flow& flow, float scale) override {
    const DeviceBatch& batch = *context.batch;
    const int64_t classes = static_cast<int64_t>(flow.hidden.numel()) / batch.rows;
    flow.grad = context.Activations(flow.hidden.numel());
    auto loss = context.device->CrossEntropy(flow.hidden.data(), batch.labels.as<int64_t>(),
                                             batch.rows, classes, scale, flow.grad.data());
    flow.hidden.Reset();
    context.Round(flow.grad);
    return loss;
  }
};

class MeanSquaredErrorLoss final : public Loss {
 public:
  absl::StatusOr<double> Compute(const StageContext& context, Flow& flow, float scale) override {
    const DeviceBatch& batch = *context.batch;
    const int64_t out = static_cast<int64_t>(flow.hidden.numel()) / batch.rows;
    flow.grad = context.Activations(flow.hidden.numel());
    auto loss = context.device->MeanSquaredError(flow.hidden.data(), batch.targets.data(),
                                                 batch.rows, out, scale, flow.grad.data());
    flow.hidden.Reset();
    context.Round(flow.grad);
    return loss;
  }
};

}  // namespace

std::unique_ptr<Loss> MakeLoss(v1::Loss loss) {
  if (loss == v1::MSE) return std::make_unique<MeanSquaredErrorLoss>();
  return std::make_unique<CrossEntropyLoss>();
}

}  // namespace shardwise::model
