#ifndef SHARDWISE_WORKER_DATA_WEIGHTS_H_
#define SHARDWISE_WORKER_DATA_WEIGHTS_H_

// A model's weights by their nn.Sequential names ("0.weight" [out, in], "0.bias" [out],
// "2.weight", ...): seeded with PyTorch's default Linear distribution, or read from a
// safetensors file and checked against the model.

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"
#include "worker/data/safetensors.h"

namespace shardwise {

// Every weight and bias uniform in ±1/sqrt(in) (PyTorch's default for nn.Linear), drawn
// layer by layer, weight before bias, from one generator seeded with `seed`.
TensorMap SeededWeights(const v1::ModelSpec& model, uint64_t seed);

// The job's initial weights: from init.safetensors_path (every tensor the model needs,
// F32, with its shape: INVALID_ARGUMENT naming the tensor otherwise) or init.seed.
absl::StatusOr<TensorMap> InitialWeights(const v1::JobSpec& spec);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_WEIGHTS_H_
