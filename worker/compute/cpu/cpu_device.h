#ifndef SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_

// The CPU implementation of device.h: host memory from the given allocator, the layers
// of cpu/ (BLAS and loops) and casts.h. Every operation completes before it returns.

#include "worker/compute/device.h"

namespace shardwise {

class CpuDevice final : public Device {
 public:
  // `allocator` (not owned) must outlive the device. `low_precision_storage`: keep a
  // job's activations and unsharded parameters in its 16-bit param_dtype, as a GPU does,
  // instead of FP32: the same results (device.h, StorageType), which tests check, so that
  // the runtime's typed buffers are exercised without a GPU.
  explicit CpuDevice(Allocator* allocator, bool low_precision_storage = false)
      : allocator_(allocator), low_precision_storage_(low_precision_storage) {}

  v1::DeviceKind kind() const override { return v1::CPU; }
  Allocator* allocator() override { return allocator_; }
  ScalarType StorageType(ScalarType compute) const override {
    return low_precision_storage_ ? compute : ScalarType::kFloat32;
  }

  // Everything else the Device interface asks for.
#include "worker/compute/device_overrides.inc"

 private:
  Allocator* const allocator_;
  const bool low_precision_storage_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_
