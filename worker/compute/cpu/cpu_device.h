#ifndef SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_

// The CPU implementation of device.h: host memory from the given allocator, the layers
// of cpu/ (BLAS and loops) and casts.h. Every operation completes before it returns.

#include "worker/compute/device.h"

namespace shardwise {

class CpuDevice final : public Device {
 public:
  // `allocator` (not owned) must outlive the device.
  explicit CpuDevice(Allocator* allocator) : allocator_(allocator) {}

  v1::DeviceKind kind() const override { return v1::CPU; }
  Allocator* allocator() override { return allocator_; }

  // Everything else the Device interface asks for.
#include "worker/compute/device_overrides.inc"

 private:
  Allocator* const allocator_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_
