#ifndef SHARDWISE_WORKER_DAEMON_MEMORY_CHECK_H_
#define SHARDWISE_WORKER_DAEMON_MEMORY_CHECK_H_

// A worker's own check, before it starts an attempt, that one rank of the job fits in
// the memory it has left (the coordinator compared the estimate with what the worker
// advertised, which other processes may have taken since).

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"
#include "worker/runtime/memory.h"

namespace shardwise {

// The memory a rank may still allocate on this worker's device now: the host's
// (runtime/host_memory.h) or, on a CUDA worker, its GPU's free memory.
using MemoryProbe = std::function<absl::StatusOr<int64_t>()>;

// What a worker measures of its memory (--check_memory; each empty: not measured).
struct MemoryProbes {
  // What a rank may still allocate on the device, checked before an attempt starts.
  MemoryProbe available;
  // What the host lets the process add before it is killed, checked by the attempt's host
  // allocator for each large block (runtime/memory.h: CpuCachingAllocator).
  HostHeadroom host_headroom;
};

// RESOURCE_EXHAUSTED naming the rank, the estimate part by part and `available` when
// contracts/memory_estimate.h's estimate for `spec` is more than `available`.
// `data_file_bytes` is the size of data.safetensors_path (0 for other data).
absl::Status CheckRankMemory(const v1::JobSpec& spec, int rank, int64_t available,
                             int64_t data_file_bytes);

// The size of data.safetensors_path, or 0 (no such data, or it cannot be stat'ed: reading
// it reports that).
int64_t DataFileBytes(const v1::JobSpec& spec);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_MEMORY_CHECK_H_
