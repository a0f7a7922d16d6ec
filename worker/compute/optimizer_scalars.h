#ifndef SHARDWISE_WORKER_COMPUTE_OPTIMIZER_SCALARS_H_
#define SHARDWISE_WORKER_COMPUTE_OPTIMIZER_SCALARS_H_

// The scalars of one optimizer step, computed on the host as PyTorch computes them
// (fsdp/optimizer.cc) and used by the per-element rules on every device: plain structs,
// so CUDA kernels include them too.

namespace shardwise {

// torch.optim.SGD. 1 - dampening is computed in double (a Python float in torch's
// buf.add_(grad, alpha=1 - dampening)) and rounded once.
struct SgdScalars {
  float lr = 0, momentum = 0, one_minus_dampening = 1, weight_decay = 0;
  bool nesterov = false;
};

// torch.optim.AdamW (single-tensor path), at step t.
struct AdamWScalars {
  float decay = 1;                  // 1 - lr * weight_decay
  float step_size = 0;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1;  // sqrt(1 - beta2^t)
  float one_minus_beta1 = 0.1f, beta2 = 0.999f, one_minus_beta2 = 0.001f, eps = 1e-8f;
  // The same step for parameters that take no weight decay.
  AdamWScalars WithoutDecay() const {
    AdamWScalars s = *this;
    s.decay = 1;
    return s;
  }
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_OPTIMIZER_SCALARS_H_
