#ifndef SHARDWISE_WORKER_CUDA_CUDNN_BACKEND_H_
#define SHARDWISE_WORKER_CUDA_CUDNN_BACKEND_H_

// cuDNN's backend C API (cudnnBackend*) as owned descriptors returning absl::Status: what
// the attention's plans (cudnn_attention_plan.h) and the device descriptions for
// deviceless planning (cudnn_device_properties.h) are built from.
//
// Thread-safety: a descriptor is used from one thread at a time.

#include <cudnn.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise::cuda {

// OK for CUDNN_STATUS_SUCCESS, else Internal naming `what`, the status and cuDNN's own
// account of the last failure (cudnnGetLastErrorString: which attribute, operation or
// engine limit it was), which the status's name alone does not say.
absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view what);

// An owned backend descriptor.
class BackendDescriptor {
 public:
  static absl::StatusOr<BackendDescriptor> Make(cudnnBackendDescriptorType_t type);
  BackendDescriptor() = default;
  BackendDescriptor(BackendDescriptor&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;
  ~BackendDescriptor();

  cudnnBackendDescriptor_t get() const { return handle_; }

  absl::Status Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                   int64_t count, const void* values);
  absl::Status SetDescriptor(cudnnBackendAttributeName_t name, const BackendDescriptor& value);
  absl::Status Finalize(absl::string_view what);
  // The one int64 attribute `name`.
  absl::StatusOr<int64_t> GetInt64(cudnnBackendAttributeName_t name, absl::string_view what) const;
  // The descriptors of attribute `name`, each created as `type` first (cuDNN fills
  // descriptors the caller made).
  absl::StatusOr<std::vector<BackendDescriptor>> GetDescriptors(cudnnBackendAttributeName_t name,
                                                                cudnnBackendDescriptorType_t type,
                                                                absl::string_view what) const;

 private:
  cudnnBackendDescriptor_t handle_ = nullptr;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDNN_BACKEND_H_
