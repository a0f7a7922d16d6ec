#ifndef SHARDWISE_CONTRACTS_MEMORY_FIT_H_
#define SHARDWISE_CONTRACTS_MEMORY_FIT_H_

// How large a job may grow before one rank's memory estimate (memory_estimate.h) passes a
// budget: the largest micro-batch, or the longest context, that fits a device. What
// `shardwise estimate --fit` answers before a job is submitted ("how long a context fits
// an 80 GiB GPU with FUSED attention?"). Pure functions of the spec.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "contracts/memory_estimate.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

enum class FitDimension {
  // Sequences (GPT) or rows (MLP) per rank per micro-step: global_batch_size =
  // value * JobRanks (job_ranks.h) * gradient_accumulation_steps.
  kMicroBatch,
  kBlockSize,  // the GPT's context, model.gpt.block_size
};

struct Fit {
  int64_t value = 0;
  v1::JobSpec spec;  // the job at that value
  MemoryEstimate estimate;
};

// The largest value of `dimension`, up to `max_value` (>= 1), at which the estimate of one rank of
// `spec` (its defaults applied) is at most `budget_bytes`, the rest of the spec as given. The
// estimate grows with either dimension, so a binary search finds it. OUT_OF_RANGE when
// even 1 does not fit; INVALID_ARGUMENT for kBlockSize on an MLP, for max_value < 1, or for
// a model that cannot be laid out.
absl::StatusOr<Fit> LargestFitting(const v1::JobSpec& spec, FitDimension dimension,
                                   int64_t budget_bytes, int64_t max_value);

// "80GiB", "80 Gi", "512MiB", "1.5TB", "1000000": binary units (KiB, MiB, GiB, TiB or
// Kubernetes' Ki, Mi, Gi, Ti), decimal ones (KB, MB, GB, TB or K, M, G, T) and bytes (B or
// none). INVALID_ARGUMENT naming the text otherwise, or for a size that is not positive or
// overflows.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_MEMORY_FIT_H_
