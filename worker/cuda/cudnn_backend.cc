#include "worker/cuda/cudnn_backend.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardwise::cuda {

absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  return absl::InternalError(absl::StrCat("cuDNN: ", what, ": ", cudnnGetErrorString(status),
                                          detail[0] != '\0' ? " (" : "", detail,
                                          detail[0] != '\0' ? ")" : ""));
}

absl::StatusOr<BackendDescriptor> BackendDescriptor::Make(cudnnBackendDescriptorType_t type) {
  BackendDescriptor descriptor;
  RETURN_IF_ERROR(CudnnStatus(cudnnBackendCreateDescriptor(type, &descriptor.handle_),
                              "cudnnBackendCreateDescriptor"));
  return descriptor;
}

BackendDescriptor::~BackendDescriptor() {
  if (handle_ != nullptr) cudnnBackendDestroyDescriptor(handle_);
}

absl::Status BackendDescriptor::Set(cudnnBackendAttributeName_t name,
                                    cudnnBackendAttributeType_t type, int64_t count,
                                    const void* values) {
  return CudnnStatus(cudnnBackendSetAttribute(handle_, name, type, count, values),
                     absl::StrCat("cudnnBackendSetAttribute(", static_cast<int>(name), ")"));
}

absl::Status BackendDescriptor::SetDescriptor(cudnnBackendAttributeName_t name,
                                              const BackendDescriptor& value) {
  cudnnBackendDescriptor_t handle = value.get();
  return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &handle);
}

absl::Status BackendDescriptor::Finalize(absl::string_view what) {
  return CudnnStatus(cudnnBackendFinalize(handle_), what);
}

absl::StatusOr<int64_t> BackendDescriptor::GetInt64(cudnnBackendAttributeName_t name,
                                                    absl::string_view what) const {
  int64_t value = 0, count = 0;
  RETURN_IF_ERROR(CudnnStatus(
      cudnnBackendGetAttribute(handle_, name, CUDNN_TYPE_INT64, 1, &count, &value), what));
  return value;
}

absl::StatusOr<std::vector<BackendDescriptor>> BackendDescriptor::GetDescriptors(
    cudnnBackendAttributeName_t name, cudnnBackendDescriptorType_t type,
    absl::string_view what) const {
  int64_t count = 0;
  RETURN_IF_ERROR(CudnnStatus(
      cudnnBackendGetAttribute(handle_, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
      what));
  std::vector<BackendDescriptor> descriptors;
  std::vector<cudnnBackendDescriptor_t> handles;
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(BackendDescriptor descriptor, Make(type));
    handles.push_back(descriptor.get());
    descriptors.push_back(std::move(descriptor));
  }
  RETURN_IF_ERROR(CudnnStatus(cudnnBackendGetAttribute(handle_, name, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                       count, &count, handles.data()),
                              what));
  descriptors.resize(static_cast<size_t>(count));
  return descriptors;
}

}  // namespace shardwise::cuda
