#ifndef SHARDWISE_WORKER_FSDP_REFERENCE_TRAINING_H_
#define SHARDWISE_WORKER_FSDP_REFERENCE_TRAINING_H_

// The single-process reference the FSDP runtime is held to: the same model trained on the
// whole global batch of every step, with no sharding, no communication and no flat
// buffers, written as plainly as possible. For tests.

#include "absl/status/statusor.h"
#include "contracts/safetensors.h"
#include "proto/job_spec.pb.h"

namespace shardwise::fsdp {

// Trains `spec` (world_size ignored) and returns the final model and the loss of every
// step (mean over the global batch).
struct ReferenceResult {
  TensorMap model;
  std::vector<double> losses;
};
absl::StatusOr<ReferenceResult> TrainReference(const v1::JobSpec& spec);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_REFERENCE_TRAINING_H_
