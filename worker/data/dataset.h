#ifndef SHARDWISE_WORKER_DATA_DATASET_H_
#define SHARDWISE_WORKER_DATA_DATASET_H_

// A job's training data, held whole by every rank (each reads only its rows), and the
// sampler that says which rows a rank trains on.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

struct Dataset {
  int64_t num_samples = 0;
  int64_t input_width = 0;
  int64_t target_width = 0;     // classes (CROSS_ENTROPY) or outputs (MSE)
  std::vector<float> x;         // [num_samples, input_width]
  std::vector<int64_t> labels;  // [num_samples], CROSS_ENTROPY
  std::vector<float> targets;   // [num_samples, target_width], MSE
};

// From data.safetensors_path (x float32 [N, in]; y int64 [N] or float32 [N, out]) or
// data.synthetic: x ~ N(0, 1) from the seed, targets from a teacher MLP of the job's
// architecture seeded with seed + 1 (its argmax for CROSS_ENTROPY, its output for MSE).
// INVALID_ARGUMENT naming the tensor when a file does not fit the model or the loss.
absl::StatusOr<Dataset> LoadDataset(const v1::JobSpec& spec);

// The rows rank `rank` of `world` trains on in micro-step `micro` of `micro_steps` of
// optimizer step `step`: of the global batch's rows (step * B + i) mod N, the rank takes
// its contiguous B / world, and the micro-step its contiguous part of those.
std::vector<int64_t> SampleRows(int64_t step, int64_t global_batch, int world, int rank, int micro,
                                int micro_steps, int64_t num_samples);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_DATASET_H_
