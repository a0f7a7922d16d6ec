#ifndef SHARDWISE_WORKER_CUDA_GPU_INFO_H_
#define SHARDWISE_WORKER_CUDA_GPU_INFO_H_

// What a CUDA worker advertises about its GPU when it registers.

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace shardwise::cuda {

// The GPU with ordinal `index`: name, memory, compute capability, the driver's CUDA
// version and the NCCL and cuDNN versions. FAILED_PRECONDITION when there is no such GPU (or no
// driver), naming the GPUs that exist.
absl::StatusOr<v1::GpuInfo> QueryGpu(int index);

// The bytes free on GPU `index` now (cudaMemGetInfo): what a CUDA worker compares with a
// job's estimated memory per rank before it starts an attempt.
absl::StatusOr<int64_t> FreeGpuMemory(int index);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_GPU_INFO_H_
