#ifndef SHARDWISE_WORKER_MODEL_LLAMA_BLOCK_H_
#define SHARDWISE_WORKER_MODEL_LLAMA_BLOCK_H_

// HF LlamaDecoderLayer, a pre-RMSNorm block:
//   x = x + self_attn(input_layernorm(x));  x = x + mlp(post_attention_layernorm(x))
// The residual's gradient is the output's plus what flows back through each branch.

#include "worker/model/llama_attention.h"
#include "worker/model/rms_norm.h"
#include "worker/model/stage.h"
#include "worker/model/swiglu.h"

namespace shardwise::model {

struct LlamaBlockModules {
  RmsNorm input_layernorm, post_attention_layernorm;
  LlamaAttention self_attn;
  SwiGlu mlp;
};

class LlamaBlock final : public Stage {
 public:
  explicit LlamaBlock(LlamaBlockModules modules) : m_(std::move(modules)) {}
  void Forward(const StageContext& context, Flow& flow) override;
  void Backward(const StageContext& context, Flow& flow) override;
  void DropSaved() override;

 private:
  const LlamaBlockModules m_;
  // Kept from the forward: the block's input, the attention branch's tensors, the residual
  // after attention and the MLP branch's tensors.
  Buffer x_, norm_1_out_;
  RmsNorm::Saved norm_1_;
  LlamaAttention::Saved attn_;
  Buffer x2_, norm_2_out_;
  RmsNorm::Saved norm_2_;
  SwiGlu::Saved mlp_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_LLAMA_BLOCK_H_
