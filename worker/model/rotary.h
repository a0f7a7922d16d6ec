#ifndef SHARDWISE_WORKER_MODEL_ROTARY_H_
#define SHARDWISE_WORKER_MODEL_ROTARY_H_

// The Llama's rotary position embeddings (HF LlamaRotaryEmbedding): the inverse frequencies
// inv_freq[i] = 1 / rope_theta^(2i / head_dim), i < head_dim / 2, with rope_scaling's llama3
// rule (HF modeling_rope_utils.py) where set, all in FP32 as HF computes them; and the
// tables cos(p inv_freq[i]), sin(p inv_freq[i]) for positions p < block_size, which the
// attention reads (compute/device.h Rotary). HF casts the tables to the activations' dtype:
// with mixed precision they are rounded to param_dtype.
//
// Thread-safety: none; one rank's training thread.

#include <cstdint>
#include <vector>

#include "proto/job_spec.pb.h"
#include "worker/model/stage.h"

namespace shardwise::model {

// From a config with its defaults filled in (WithLlamaDefaults).
std::vector<float> RotaryInverseFrequencies(const v1::LlamaConfig& llama);

struct RotaryHostTables {
  std::vector<float> cos, sin;  // [positions, head_dim / 2]
};
RotaryHostTables ComputeRotaryTables(const v1::LlamaConfig& llama, int64_t positions);

// The tables on the device, made at the first use; shared by a model's attention layers.
class RotaryTables {
 public:
  explicit RotaryTables(const v1::LlamaConfig& llama) : llama_(llama) {}
  // The device tables for block_size positions, rounded to the context's compute type.
  const float* cos(const StageContext& context) { return Ready(context).cos.data(); }
  const float* sin(const StageContext& context) { return Ready(context).sin.data(); }

 private:
  struct Device {
    Buffer cos, sin;
  };
  const Device& Ready(const StageContext& context);

  const v1::LlamaConfig llama_;
  Device device_;
  shardwise::Device* made_on_ = nullptr;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_ROTARY_H_
