#ifndef SHARDWISE_WORKER_MODEL_BLOCK_H_
#define SHARDWISE_WORKER_MODEL_BLOCK_H_

// nanoGPT's Block, a pre-LayerNorm transformer block:
//   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x)),  mlp = c_proj(gelu(c_fc(.)))
// The residual's gradient is the output's plus what flows back through each branch.

#include <cstdint>

#include "proto/job_spec.pb.h"
#include "worker/model/attention.h"
#include "worker/model/layer_norm.h"
#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

struct BlockModules {
  LayerNorm ln_1, ln_2;
  CausalSelfAttention attn;
  Linear c_fc, c_proj;
  v1::Activation activation;  // GELU or GELU_TANH
};

class Block final : public Stage {
 public:
  explicit Block(BlockModules modules) : m_(modules) {}
  void Forward(const StageContext& context, Flow& flow) override;
  void Backward(const StageContext& context, Flow& flow) override;
  void DropSaved() override;

 private:
  const BlockModules m_;
  // Kept from the forward: the block's input and the attention branch's tensors, the
  // residual after attention and the MLP branch's tensors.
  Buffer x_, ln_1_out_;
  LayerNorm::Saved ln_1_;
  CausalSelfAttention::Saved attn_;
  Buffer x2_, ln_2_out_, fc_out_, act_out_;
  LayerNorm::Saved ln_2_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_BLOCK_H_
