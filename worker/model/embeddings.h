#ifndef SHARDWISE_WORKER_MODEL_EMBEDDINGS_H_
#define SHARDWISE_WORKER_MODEL_EMBEDDINGS_H_

// The GPT's input stages: the token embedding (transformer.wte) starts the hidden state
// from the batch's tokens; the position embedding (transformer.wpe) adds each token's
// position's row: x = wte[token] + wpe[position], nanoGPT's tok_emb + pos_emb.

#include <cstdint>

#include "worker/model/stage.h"

namespace shardwise::model {

class TokenEmbedding final : public Stage {
 public:
  TokenEmbedding(int weight, int64_t dim) : weight_(weight), dim_(dim) {}
  void Forward(const StageContext& context, Flow& flow) override;
  // Adds each row's gradient into its token's row (in row order); no input gradient.
  void Backward(const StageContext& context, Flow& flow) override;
  void DropSaved() override {}

 private:
  const int weight_;
  const int64_t dim_;
};

class PositionEmbedding final : public Stage {
 public:
  PositionEmbedding(int weight, int64_t dim) : weight_(weight), dim_(dim) {}
  void Forward(const StageContext& context, Flow& flow) override;
  // The gradient passes through unchanged (x = tok_emb + pos_emb).
  void Backward(const StageContext& context, Flow& flow) override;
  void DropSaved() override {}

 private:
  const int weight_;
  const int64_t dim_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_EMBEDDINGS_H_
