#ifndef SHARDWISE_CONTRACTS_MEMORY_ESTIMATE_H_
#define SHARDWISE_CONTRACTS_MEMORY_ESTIMATE_H_

// How much memory one rank of a job allocates at its peak, from the spec alone: what the
// coordinator compares with the memory workers advertise when a job is submitted and
// placed, and what a worker compares with the memory it has left before it starts an
// attempt. The sizes follow the runtime's allocations (docs/operations.md, "Memory per
// rank", states them); bench/gpt_bench checks them against the allocator's peak counters.
// An estimate, not a bound: it leaves out the process itself, communication staging and
// the allocator's cache, so it refuses only jobs that cannot fit.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

struct MemoryEstimate {
  // Sharded FP32 parameters, the units gathered at once (in the storage type,
  // StoredElementBytes), and the 16-bit copies a gather makes with mixed precision.
  int64_t parameters = 0;
  // The sharded gradients and the unsharded gradients of the units in backward.
  int64_t gradients = 0;
  int64_t optimizer_state = 0;  // AdamW: two per shard element; SGD with momentum: one
  // What one micro-batch's forward keeps for backward (with activation checkpointing: the
  // blocks' inputs and one block recomputed), the logits and their gradient.
  int64_t activations = 0;
  int64_t data = 0;  // the dataset held in memory (synthetic or safetensors) and one batch

  // The sum, saturated at INT64_MAX.
  int64_t total() const;
  // "2.3 GiB (parameters 1.0 GiB, gradients ..., optimizer state ..., activations ...,
  // data ...)".
  std::string ToString() const;
  v1::MemoryEstimate ToProto() const;
};

// "2.3 GiB (parameters 1.0 GiB, ...)" for the estimate a job carries.
std::string DescribeMemoryEstimate(const v1::MemoryEstimate& estimate);

// The bytes of one stored activation, activation gradient or unsharded parameter element
// of `spec` on its device (Device::StorageType): 2 where a CUDA job with a 16-bit
// param_dtype stores in it (cuda.storage STORAGE_PARAM_DTYPE), else 4. Sharded parameters,
// gradients, optimizer state and statistics are FP32 whatever it is.
int StoredElementBytes(const v1::JobSpec& spec);

// The estimate for one rank of `spec` (defaults applied). `data_file_bytes` is the size
// of data.safetensors_path when the caller knows it (workers do; the coordinator does not
// read data files on a request). Every size saturates at INT64_MAX rather than overflow.
// INVALID_ARGUMENT for a model or wrap policy that cannot be laid out.
absl::StatusOr<MemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec,
                                                  int64_t data_file_bytes = 0);

// The part of EstimateRankMemory's activations that the CPU's kernels hold outside the
// device's tensors (the attention's working space), which the allocator's counters do not
// see; 0 on CUDA and for an MLP.
int64_t KernelScratchBytes(const v1::JobSpec& spec);

// "512 B", "3.0 MiB", "2.5 GiB".
std::string FormatBytes(int64_t bytes);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_MEMORY_ESTIMATE_H_
