#include "worker/cuda/gpu_info.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/cudnn_requirements.h"
#include "worker/cuda/nccl_launch_plan.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {

absl::StatusOr<v1::GpuInfo> QueryGpu(int index) {
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--gpu=", index, ": no usable CUDA driver or GPU (", cudaGetErrorString(counted), ")"));
  }
  if (index < 0 || index >= count) {
    return absl::FailedPreconditionError(absl::StrCat("--gpu=", index, ": this host has ", count,
                                                      " GPU(s), ordinals 0 to ", count - 1));
  }
  cudaDeviceProp props;
  RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&props, index));
  int driver = 0;
  RETURN_IF_CUDA_ERROR(cudaDriverGetVersion(&driver));
  int nccl = 0;
  ncclGetVersion(&nccl);
  v1::GpuInfo info;
  info.set_index(index);
  info.set_name(props.name);
  info.set_memory_bytes(static_cast<int64_t>(props.totalGlobalMem));
  info.set_compute_capability_major(props.major);
  info.set_compute_capability_minor(props.minor);
  info.set_driver_version(absl::StrCat(driver / 1000, ".", driver % 1000 / 10));
  info.set_nccl_version(NcclVersionText(nccl));
  info.set_cudnn_version(CudnnVersionText(static_cast<int64_t>(cudnnGetVersion())));
  return info;
}

absl::StatusOr<int64_t> FreeGpuMemory(int index) {
  RETURN_IF_CUDA_ERROR(SetThreadGpu(index));
  size_t free = 0, total = 0;
  RETURN_IF_CUDA_ERROR(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

}  // namespace shardwise::cuda
