#ifndef SHARDWISE_WORKER_MODEL_LM_HEAD_H_
#define SHARDWISE_WORKER_MODEL_LM_HEAD_H_

// The GPT's LM head: logits = x wte^T, a Linear without bias whose weight is the token
// embedding's (tied). Its weight gradient adds to the embedding's, so the tied weight's
// gradient sums both uses, as autograd sums them in PyTorch.

#include <cstdint>

#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class LmHead final : public Stage {
 public:
  LmHead(int tied_weight, int64_t dim, int64_t vocab) : linear_(tied_weight, -1, dim, vocab) {}
  void Forward(const StageContext& context, Flow& flow) override;
  void Backward(const StageContext& context, Flow& flow) override;
  void DropSaved() override { input_.Reset(); }

 private:
  const Linear linear_;
  Buffer input_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_LM_HEAD_H_
