#include "worker/model/embeddings.h"

namespace shardwise::model {

void TokenEmbedding::Forward(const StageContext& context, Flow& flow) {
  const DeviceBatch& batch = *context.batch;
  flow.hidden = context.Activations(batch.rows * dim_);
  context.device->EmbeddingForward(context.params->value(weight_), batch.tokens.as<int64_t>(),
                                   batch.rows, dim_, flow.hidden.ref());
}

void TokenEmbedding::Backward(const StageContext& context, Flow& flow) {
  const DeviceBatch& batch = *context.batch;
  context.device->EmbeddingBackward(batch.tokens.as<int64_t>(), flow.grad.ref(), batch.rows, dim_,
                                    context.params->grad(weight_));
  flow.grad.Reset();
}

void PositionEmbedding::Forward(const StageContext& context, Flow& flow) {
  const DeviceBatch& batch = *context.batch;
  Buffer rows = context.Activations(batch.rows * dim_);
  context.device->EmbeddingForward(context.params->value(weight_), batch.positions.as<int64_t>(),
                                   batch.rows, dim_, rows.ref());
  context.device->Accumulate(flow.hidden.ref(), rows.ref(), rows.numel());
  context.Round(flow.hidden);
}

void PositionEmbedding::Backward(const StageContext& context, Flow& flow) {
  const DeviceBatch& batch = *context.batch;
  context.device->EmbeddingBackward(batch.positions.as<int64_t>(), flow.grad.ref(), batch.rows,
                                    dim_, context.params->grad(weight_));
}

}  // namespace shardwise::model
