#include "worker/cuda/cudnn_device_properties.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardwise::cuda {
namespace {

// What every GPU of compute capability 8.0 to 9.0 reports alike.
GpuProperties WithName(std::string name, int compute_capability) {
  GpuProperties gpu;
  gpu.name = std::move(name);
  gpu.compute_capability = compute_capability;
  gpu.driver_version = 13000;
  return gpu;
}

}  // namespace

GpuProperties H100Sxm() {
  GpuProperties gpu = WithName("NVIDIA H100 80GB HBM3", 90);
  gpu.multiprocessors = 132;
  gpu.global_memory_bytes = 85'029'158'912;
  gpu.l2_cache_bytes = 52'428'800;
  gpu.shared_memory_per_block_optin = 232'448;
  gpu.pci_device_id = 0x2330;
  gpu.sm_clock_khz = 1'980'000;
  gpu.memory_clock_khz = 2'619'000;
  return gpu;
}

GpuProperties H200Sxm() {
  GpuProperties gpu = WithName("NVIDIA H200", 90);
  gpu.multiprocessors = 132;
  gpu.global_memory_bytes = 150'110'011'392;
  gpu.l2_cache_bytes = 52'428'800;
  gpu.shared_memory_per_block_optin = 232'448;
  gpu.pci_device_id = 0x2335;
  gpu.sm_clock_khz = 1'980'000;
  gpu.memory_clock_khz = 3'201'000;
  return gpu;
}

GpuProperties A100Sxm() {
  GpuProperties gpu = WithName("NVIDIA A100-SXM4-80GB", 80);
  gpu.multiprocessors = 108;
  gpu.global_memory_bytes = 85'100'068'864;
  gpu.l2_cache_bytes = 41'943'040;
  gpu.shared_memory_per_block_optin = 166'912;
  gpu.pci_device_id = 0x20B2;
  gpu.sm_clock_khz = 1'410'000;
  gpu.memory_clock_khz = 1'593'000;
  return gpu;
}

std::string DevicePropertiesJson(const GpuProperties& gpu) {
  nlohmann::json json = {
      {"deviceName", gpu.name},
      {"deviceVer", gpu.compute_capability * 10},
      {"multiProcessorCount", gpu.multiprocessors},
      {"totalGlobalMem", gpu.global_memory_bytes},
      {"l2CacheSize", gpu.l2_cache_bytes},
      {"maxSharedMemoryPerBlockOptin", gpu.shared_memory_per_block_optin},
      {"pciDeviceId", gpu.pci_device_id},
      {"smClockRateKHz", gpu.sm_clock_khz},
      {"memClockRateKHz", gpu.memory_clock_khz},
      {"driverVer", gpu.driver_version},
      {"cudaDeviceId", 0},
      // The same on every GPU from compute capability 8.0 to 9.0.
      {"maxGridSize", {2'147'483'647, 65'535, 65'535}},
      {"maxBlockSize", {1024, 1024, 64}},
      {"maxThreadsPerBlock", 1024},
      {"maxThreadsPerSM", 2048},
      {"maxCtasPerSM", 32},
      {"warpSize", 32},
      {"regsPerBlock", 65'536},
      {"maxRegistersPerSM", 65'536},
      {"maxSharedMemoryPerBlock", 49'152},
      {"reservedSharedMemoryPerBlock", 1024},
      {"isTccDriver", 0},
      {"supportCoopLaunch", 1},
  };
  return json.dump();
}

absl::StatusOr<BackendDescriptor> DeviceProperties(const GpuProperties& gpu) {
  ASSIGN_OR_RETURN(BackendDescriptor device,
                   BackendDescriptor::Make(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR));
  const std::string json = DevicePropertiesJson(gpu);
  RETURN_IF_ERROR(device.Set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                             static_cast<int64_t>(json.size()), json.data()));
  RETURN_IF_ERROR(device.Finalize(absl::StrCat("the description of an ", gpu.name)));
  return device;
}

}  // namespace shardwise::cuda
