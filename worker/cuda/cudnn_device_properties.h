#ifndef SHARDWISE_WORKER_CUDA_CUDNN_DEVICE_PROPERTIES_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_DEVICE_PROPERTIES_H_

// A GPU described for cuDNN's deviceless planning (cuDNN 9.8 and newer): its heuristics
// and its engines' kernel compilation read a CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR in place
// of a handle, so the attention's plans (cudnn_attention_plan.h) are chosen, compiled and
// sized on a machine without the GPU. That is how the CPU tests check, against cuDNN
// itself, that the flash-attention graphs are recognised and what workspace they take
// (cudnn_attention_plan_test).
//
// The descriptor's JSON form is cuDNN's own and undocumented; its members are the ones
// cuDNN 9.19's parser requires (each refusal names the one missing), with the values
// cudaGetDeviceProperties reports for each GPU below (compute capability as
// major * 100 + minor * 10, cuDNN's `deviceVer`). Pure but for DeviceProperties, which
// asks cuDNN; safe from any thread.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/cuda/cudnn_backend.h"

namespace shardwise::cuda {

struct GpuProperties {
  std::string name;
  int compute_capability = 0;  // major * 10 + minor: 90 for an H100 or H200
  int multiprocessors = 0;
  int64_t global_memory_bytes = 0;
  int64_t l2_cache_bytes = 0;
  int64_t shared_memory_per_block_optin = 0;  // the most one block may opt in to
  int pci_device_id = 0;
  int sm_clock_khz = 0;
  int memory_clock_khz = 0;
  int driver_version = 0;  // cuDriverGetVersion(): 13000 for CUDA 13.0
};

// The GPUs Shardwise's GPU figures come from, and the one before them.
GpuProperties H100Sxm();
GpuProperties H200Sxm();
GpuProperties A100Sxm();

// cuDNN's JSON form of `gpu` (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION).
std::string DevicePropertiesJson(const GpuProperties& gpu);

// A finalized DEVICEPROP descriptor of `gpu`; fails where cuDNN is older than 9.8 or
// refuses the description (its message names the member).
absl::StatusOr<BackendDescriptor> DeviceProperties(const GpuProperties& gpu);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_DEVICE_PROPERTIES_H_
