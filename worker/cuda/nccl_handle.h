#ifndef SHARDWISE_WORKER_CUDA_NCCL_HANDLE_H_
#define SHARDWISE_WORKER_CUDA_NCCL_HANDLE_H_

// An NCCL communicator's handle as its owning thread calls it and any thread aborts it.
//
// NCCL lets one thread at a time operate a communicator, and ncclCommAbort frees it. An
// abort must still reach a communicator whose owner is blocked somewhere else: a thread
// synchronising a stream that waits for one of the communicator's kernels (a peer gone
// mid-all-gather), or waiting for its turn at launching behind such a thread, polls
// nothing, so an abort left for the owner to carry out would never happen and the hang it
// is meant to end would last. So the owner makes each NCCL call through Call(), under a
// lock held only for that call (the communicator is non-blocking: every call but the
// abort returns at once), and Abort() takes the same lock from any thread, calls
// ncclCommAbort once, and leaves nothing to call after it. An abort asked for while the
// owner has a group open (ncclGroupStart .. ncclGroupEnd, whose calls point at the
// communicator until the group ends) waits for GroupClosed().
//
// Thread-safety: Call, GroupOpened, GroupClosed and Release from the owning thread; Abort
// and aborted from any.

#include <nccl.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardwise::cuda {

class NcclHandle {
 public:
  using AbortFunction = ncclResult_t (*)(ncclComm_t);

  // `abort_function` is ncclCommAbort but in tests.
  explicit NcclHandle(ncclComm_t comm, AbortFunction abort_function = &ncclCommAbort);
  NcclHandle(const NcclHandle&) = delete;
  NcclHandle& operator=(const NcclHandle&) = delete;

  // Runs `call(comm)` and returns its result, or returns `if_aborted` without calling
  // anything once the communicator was aborted (or is to be, at the end of a group).
  template <typename NcclCall>
  ncclResult_t Call(NcclCall&& call, ncclResult_t if_aborted = ncclInvalidUsage) {
    absl::MutexLock lock(&mu_);
    if (comm_ == nullptr || abort_pending_) return if_aborted;
    return call(comm_);
  }

  // Around the owner's group (ncclGroupStart, its calls through Call, ncclGroupEnd): an
  // abort asked for in between is carried out by GroupClosed().
  void GroupOpened();
  void GroupClosed();

  // Aborts the communicator once (now, or at the end of the owner's open group); true for
  // the call that asked first.
  bool Abort();
  bool aborted() const;

  // The communicator, for the owner to destroy once finalized, or null once aborted; no
  // thread can abort it after this.
  ncclComm_t Release();

 private:
  void AbortNowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AbortFunction abort_function_;
  mutable absl::Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);
  bool grouping_ ABSL_GUARDED_BY(mu_) = false;
  bool abort_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool abort_asked_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_NCCL_HANDLE_H_
