#ifndef SHARDWISE_WORKER_CUDA_NCCL_COMMUNICATOR_H_
#define SHARDWISE_WORKER_CUDA_NCCL_COMMUNICATOR_H_

// Communicator over NCCL, for CUDA jobs: the collectives of comm/communicator.h on device
// buffers, enqueued on one stream (the caller's communication stream).
//
// Hangs and errors are caught by a watchdog in every wait: the communicator is created in
// NCCL's non-blocking mode, so no NCCL call blocks the thread (but for one that meets
// another thread's ncclCommAbort in progress: it waits for it), and each collective's
// completion is polled together with ncclCommGetAsyncError, the deadline and the abort
// flag. On a peer's failure or a collective that runs past `timeout`, the communicator is
// aborted with ncclCommAbort, which also stops its kernels on the GPU, the collective
// returns an error naming what it was, and NcclOptions::on_failure ends the rank's other
// communicators. Abort() (from any thread: the worker aborting its job) calls
// ncclCommAbort at once, on its own thread (nccl_handle.h), so it also ends a hang whose
// owner is blocked where it polls nothing. A worker therefore never stays stuck in NCCL
// after its job ended. Every later collective fails with the same error.
//
// The NCCL unique id travels through the job's rendezvous store (the coordinator's, in
// the daemon): rank 0 creates it, the others read it.
//
// Thread-safety: one collective at a time (as Communicator); Abort() from any thread.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "worker/comm/communicator.h"
#include "worker/cuda/nccl_handle.h"
#include "worker/cuda/nccl_launch_plan.h"

namespace shardwise::cuda {

struct NcclOptions {
  // A collective (or the communicator's creation) that has not finished after this long
  // is aborted; DEADLINE_EXCEEDED.
  absl::Duration timeout = absl::Minutes(10);
  // How often a wait polls for completion, errors and aborts.
  absl::Duration poll_interval = absl::Microseconds(20);
  // The stream the calling thread computes on, when it may differ from the
  // communicator's: each collective's stream then first waits for the caller's work so
  // far (an event), so it reads what the caller produced; and, stream-ordered, the
  // caller's stream then waits for the collective (its completion event), so what the
  // caller queues next reads its result. Empty: the same stream.
  std::function<cudaStream_t()> stream_of_caller;
  // Collectives return once NCCL has enqueued them on the stream, not once they completed
  // (Communicator::stream_ordered): the caller orders later work after them on the device,
  // and CollectivesCompleted() (or WaitForCompletion()) watches them with the same
  // watchdog, the deadline counted from the call. Barrier() always waits: a barrier
  // nobody waits for orders nothing.
  bool stream_ordered = false;
  // Synchronous mode (CudaDeviceOptions::synchronous): every collective returns once it
  // completed, stream_ordered or not.
  bool synchronous = false;
  // Told, once, when the communicator aborts itself on an error of its own (not on
  // Abort()): the rank aborts all its communicators, this one with them.
  std::function<void(const absl::Status&)> on_failure;
  // ncclCommAbort but in tests.
  NcclHandle::AbortFunction abort_function = &ncclCommAbort;
};

// The launch plan for the NCCL this process loaded (nccl_launch_plan.h), decided once:
// where it says so, NCCL_LAUNCH_ORDER_IMPLICIT=1 is set then, before any communicator
// exists (NCCL reads it once). Connect() calls it first; the worker daemon calls it as
// it starts, before its threads.
const NcclLaunchPlan& ProcessNcclLaunchPlan();

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group of `size` ranks named `name` in `store` as `rank`, on the current
  // device, with collectives on `stream`.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Connect(gloo::rendezvous::Store& store,
                                                                   const std::string& name,
                                                                   int rank, int size,
                                                                   cudaStream_t stream,
                                                                   const NcclOptions& options = {});
  ~NcclCommunicator() override;

  using Communicator::AllGather;
  using Communicator::AllReduce;
  using Communicator::Broadcast;
  using Communicator::ReduceScatter;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status AllGather(const void* shard, size_t shard_numel, void* out,
                         ScalarType type) override;
  absl::Status ReduceScatter(void* in, size_t shard_numel, void* shard, ScalarType type) override;
  absl::Status AllReduce(void* data, size_t numel, ScalarType type) override;
  absl::Status Broadcast(void* data, size_t numel, int root, ScalarType type) override;
  absl::Status Barrier() override;
  bool stream_ordered() const override { return options_.stream_ordered; }
  // From the training thread while the lane's thread polls completions: atomic.
  void SetTimeout(std::chrono::milliseconds timeout) override {
    timeout_ms_.store(timeout.count());
  }
  absl::StatusOr<bool> CollectivesCompleted() override;
  // Polls CollectivesCompleted() until true or an error.
  absl::Status WaitForCompletion();

  // Runs `enqueue`, whose collectives on this communicator are launched as one NCCL group
  // (ncclGroupStart/End) and waited for together: what a step issuing several collectives
  // at once (HYBRID's reduce-scatter then all-reduce, say) uses.
  template <typename Enqueue>
  absl::Status Grouped(Enqueue&& enqueue) {
    absl::Status begun = BeginGroup();
    if (!begun.ok()) return begun;
    absl::Status status = enqueue();
    absl::Status ended = EndGroup();
    return status.ok() ? ended : status;
  }

  // Aborts the communicator from any thread, with ncclCommAbort on the calling thread:
  // the owner's wait for a collective in flight, if any, and every later collective
  // returns ABORTED with `reason`.
  void Abort(const std::string& reason);

 private:
  NcclCommunicator(ncclComm_t comm, int rank, int size, cudaStream_t stream,
                   const NcclOptions& options);
  absl::Status BeginGroup();
  absl::Status EndGroup();
  // The watchdog, polling until the NCCL call just made is enqueued (a non-blocking
  // communicator may still be launching it), then until the stream has run it
  // (CollectivesCompleted): each poll checks for an abort, NCCL's asynchronous error and
  // the deadline.
  absl::Status WaitEnqueued(const char* what, absl::Time called);
  // One poll's checks: an error once the communicator must be aborted; else whether
  // NCCL still works on its last call.
  absl::StatusOr<bool> StillLaunching(const char* what);
  absl::Status Overdue(const char* what);
  // The error of an NCCL call that failed (or was refused: the communicator was aborted
  // by another thread), the communicator aborted.
  absl::Status CallFailed(ncclResult_t result, const char* what);
  absl::Status AbortedStatus(const char* what);
  // Checks the result of an NCCL call, then waits unless a group is open (only until it
  // is enqueued, when stream-ordered).
  absl::Status Finish(ncclResult_t result, const char* what);
  absl::Status AbortWith(absl::Status why);

  NcclHandle handle_;
  const int rank_, size_;
  const cudaStream_t stream_;
  const NcclOptions options_;
  // options_.timeout until SetTimeout; what each collective's deadline counts.
  std::atomic<int64_t> timeout_ms_;
  absl::Duration timeout() const { return absl::Milliseconds(timeout_ms_.load()); }
  // Orders the collective after the caller's stream (NcclOptions::stream_of_caller).
  absl::Status FollowCaller();
  // Orders the caller's stream after the collective just enqueued (stream-ordered, on a
  // stream other than the caller's).
  absl::Status OrderCallerAfter();

  // The collectives enqueued and not yet seen completed, oldest first: each with an
  // event recorded after it and its call time, so each has its own deadline however
  // many are in flight (a stream-ordered communicator may have several).
  struct Pending {
    cudaEvent_t done;
    absl::Time called;
    const char* what;
  };
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;  // of completed collectives, for reuse
  absl::StatusOr<cudaEvent_t> TakeEvent();
  void RecycleEvents();           // every pending event back to spare_events_
  cudaEvent_t caller_ = nullptr;  // recorded on the caller's stream
  int* barrier_word_ = nullptr;   // device scratch for Barrier
  bool grouping_ = false;
  std::atomic<bool> abort_requested_{false};
  absl::Mutex mu_;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_;  // sticky: set once the communicator was aborted
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_NCCL_COMMUNICATOR_H_
