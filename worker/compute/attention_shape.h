#ifndef SHARDWISE_WORKER_COMPUTE_ATTENTION_SHAPE_H_
#define SHARDWISE_WORKER_COMPUTE_ATTENTION_SHAPE_H_

#include <cmath>
#include <cstdint>

#include "worker/compute/host_device.h"

namespace shardwise {

// The shape of one causal self-attention call: `batch` sequences of `seq` tokens,
// `heads` heads of `head_dim` each (the model's width is heads * head_dim).
struct AttentionShape {
  int64_t batch, seq, heads, head_dim;
  SHARDWISE_HOST_DEVICE int64_t width() const { return heads * head_dim; }
};

// The scores' scale, 1 / sqrt(head_dim), rounded once from double: every attention path
// (cpu/attention, cuda/attention, fused_attention_rows.h) takes it from here, so all scale
// by the same value.
template <typename T>
SHARDWISE_HOST_DEVICE T AttentionScale(int64_t head_dim) {
  return static_cast<T>(1.0 / sqrt(static_cast<double>(head_dim)));
}

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_ATTENTION_SHAPE_H_
