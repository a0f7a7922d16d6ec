#include "worker/cuda/nccl_handle.h"

namespace shardwise::cuda {

NcclHandle::NcclHandle(ncclComm_t comm, AbortFunction abort_function)
    : abort_function_(abort_function), comm_(comm) {}

void NcclHandle::GroupOpened() {
  absl::MutexLock lock(&mu_);
  grouping_ = true;
}

void NcclHandle::GroupClosed() {
  absl::MutexLock lock(&mu_);
  grouping_ = false;
  if (abort_pending_) AbortNowLocked();
}

bool NcclHandle::Abort() {
  absl::MutexLock lock(&mu_);
  const bool first = !abort_asked_;
  abort_asked_ = true;
  if (grouping_) {
    abort_pending_ = comm_ != nullptr;
  } else {
    AbortNowLocked();
  }
  return first;
}

bool NcclHandle::aborted() const {
  absl::MutexLock lock(&mu_);
  return abort_asked_;
}

ncclComm_t NcclHandle::Release() {
  absl::MutexLock lock(&mu_);
  if (abort_pending_) AbortNowLocked();
  ncclComm_t comm = comm_;
  comm_ = nullptr;
  return comm;
}

void NcclHandle::AbortNowLocked() {
  abort_pending_ = false;
  if (comm_ == nullptr) return;
  // Held under the lock for its whole length (it blocks until the communicator's kernels
  // and proxy threads stopped): the owner's next call then finds nothing to call.
  abort_function_(comm_);
  comm_ = nullptr;
}

}  // namespace shardwise::cuda
