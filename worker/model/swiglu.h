#ifndef SHARDWISE_WORKER_MODEL_SWIGLU_H_
#define SHARDWISE_WORKER_MODEL_SWIGLU_H_

// HF LlamaMLP: y = down_proj(silu(gate_proj(x)) * up_proj(x)). As in PyTorch, SiLU's output
// and the product are each rounded to the compute type.

#include <cstdint>

#include "worker/model/linear.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class SwiGlu {
 public:
  SwiGlu(Linear gate_proj, Linear up_proj, Linear down_proj)
      : gate_(gate_proj), up_(up_proj), down_(down_proj) {}

  struct Saved {
    Buffer gate, up, act, hidden;  // [rows, intermediate]: gate, up, silu(gate), act * up
  };
  // y [rows, hidden_size] from x, rounded.
  Buffer Forward(const StageContext& context, ConstTensorRef x, Saved* saved) const;
  // Adds the parameters' gradients; returns dx, rounded; frees `saved`.
  Buffer Backward(const StageContext& context, ConstTensorRef x, Saved* saved,
                  ConstTensorRef dy) const;

 private:
  const Linear gate_, up_, down_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_SWIGLU_H_
