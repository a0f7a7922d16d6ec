#include "worker/cuda/nccl_communicator.h"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {
namespace {

ncclDataType_t NcclType(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat16:
      return ncclFloat16;
    case ScalarType::kBFloat16:
      return ncclBfloat16;
    case ScalarType::kInt64:
      return ncclInt64;
    case ScalarType::kFloat64:
      return ncclFloat64;
    case ScalarType::kFloat32:
      break;
  }
  return ncclFloat32;
}

// Waits, polling, until the non-blocking `comm` has finished its last call; the result is
// that call's (or an error's).
ncclResult_t PollAsync(ncclComm_t comm, absl::Time deadline, absl::Duration poll, bool* timed_out) {
  *timed_out = false;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) return queried;
    if (state != ncclInProgress) return state;
    if (absl::Now() > deadline) {
      *timed_out = true;
      return ncclInProgress;
    }
    absl::SleepFor(poll);
  }
}

}  // namespace

const NcclLaunchPlan& ProcessNcclLaunchPlan() {
  static const NcclLaunchPlan* const plan = [] {
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess) version = 0;
    auto* decided = new NcclLaunchPlan(
        PlanNcclLaunches(version, std::getenv(kNcclImplicitLaunchOrderVariable)));
    if (decided->set_implicit_order) {
      setenv(kNcclImplicitLaunchOrderVariable, "1", /*overwrite=*/0);
    }
    return decided;
  }();
  return *plan;
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Connect(
    gloo::rendezvous::Store& store, const std::string& name, int rank, int size,
    cudaStream_t stream, const NcclOptions& options) {
  ProcessNcclLaunchPlan();  // its variable set before NCCL's first communicator reads it
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL group '", name, "': rank ", rank, " is not in [0, ", size, ")"));
  }
  const std::string key = absl::StrCat(name, "/nccl_unique_id");
  ncclUniqueId id;
  if (rank == 0) {
    RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    store.set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    try {
      store.wait({key});
      const std::vector<char> bytes = store.get(key);
      if (bytes.size() != sizeof(id.internal)) {
        return absl::InternalError(absl::StrCat("NCCL group '", name,
                                                "': the unique id in the "
                                                "store has ",
                                                bytes.size(), " bytes, not ", sizeof(id.internal)));
      }
      std::memcpy(id.internal, bytes.data(), bytes.size());
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("NCCL group '", name, "': reading the unique id: ", e.what()));
    }
  }

  // Non-blocking: creation returns at once and is polled, so a peer that never joins ends
  // in DEADLINE_EXCEEDED instead of a thread stuck in ncclCommInitRank.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    return NcclStatus(started, "ncclCommInitRankConfig");
  }
  bool timed_out = false;
  const ncclResult_t ready =
      PollAsync(comm, absl::Now() + options.timeout, options.poll_interval, &timed_out);
  if (ready != ncclSuccess) {
    ncclCommAbort(comm);
    if (timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat("NCCL group '", name, "': rank ", rank, " of ", size, " waited ",
                       absl::FormatDuration(options.timeout), " for its peers to join"));
    }
    return NcclStatus(ready, "ncclCommInitRankConfig");
  }
  auto communicator =
      std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, rank, size, stream, options));
  RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&communicator->caller_, cudaEventDisableTiming));
  RETURN_IF_CUDA_ERROR(
      cudaMalloc(reinterpret_cast<void**>(&communicator->barrier_word_), sizeof(int)));
  return communicator;
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int size, cudaStream_t stream,
                                   const NcclOptions& options)
    : comm_(comm), rank_(rank), size_(size), stream_(stream), options_(options) {}

NcclCommunicator::~NcclCommunicator() {
  // comm_ is null once aborted. A healthy communicator is finalized (which flushes its
  // work) and destroyed; one whose finalization fails or outlasts the timeout, or whose
  // job was aborted, is aborted.
  if (comm_ != nullptr) {
    ncclResult_t result = ncclInternalError;
    if (!abort_requested_.load()) {
      result = ncclCommFinalize(comm_);
      bool timed_out = false;
      if (result == ncclSuccess || result == ncclInProgress) {
        result =
            PollAsync(comm_, absl::Now() + options_.timeout, options_.poll_interval, &timed_out);
      }
    }
    if (result == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  RecycleEvents();
  for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
  if (caller_ != nullptr) cudaEventDestroy(caller_);
  if (barrier_word_ != nullptr) cudaFree(barrier_word_);
}

void NcclCommunicator::Abort(const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (abort_reason_.empty()) abort_reason_ = reason;
  }
  abort_requested_.store(true);
}

absl::Status NcclCommunicator::AbortLocked(absl::Status why) {
  if (failed_.ok()) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    RecycleEvents();  // nothing is waited for on an aborted communicator
    failed_ = why;
  }
  return failed_;
}

absl::StatusOr<bool> NcclCommunicator::StillLaunching(const char* what) {
  if (abort_requested_.load()) {
    std::string reason;
    {
      absl::MutexLock lock(&mu_);
      reason = abort_reason_;
    }
    return AbortLocked(absl::AbortedError(
        absl::StrCat(what, " aborted: ", reason, "; the NCCL communicator was aborted")));
  }
  // NCCL's asynchronous error on every poll, not only until the call is enqueued: a peer
  // lost while the collective's kernel runs is reported here, not at the deadline.
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
  if (queried != ncclSuccess) state = queried;
  if (state != ncclSuccess && state != ncclInProgress) return AbortLocked(NcclStatus(state, what));
  return state == ncclInProgress;
}

absl::Status NcclCommunicator::Overdue(const char* what) {
  return AbortLocked(absl::DeadlineExceededError(
      absl::StrCat(what, " on rank ", rank_, " of ", size_, " did not finish in ",
                   absl::FormatDuration(options_.timeout), "; the NCCL communicator was aborted")));
}

absl::Status NcclCommunicator::WaitEnqueued(const char* what, absl::Time called) {
  const absl::Time deadline = called + options_.timeout;
  for (;;) {
    ASSIGN_OR_RETURN(const bool launching, StillLaunching(what));
    if (!launching) break;
    if (absl::Now() > deadline) return Overdue(what);
    absl::SleepFor(options_.poll_interval);
  }
  ASSIGN_OR_RETURN(cudaEvent_t done, TakeEvent());
  const cudaError_t recorded = cudaEventRecord(done, stream_);
  if (recorded != cudaSuccess) {
    spare_events_.push_back(done);
    // The collective is enqueued but cannot be watched: aborted, so no kernel of it goes
    // on reading buffers its caller frees on this error.
    return AbortLocked(CudaStatus(recorded, "cudaEventRecord"));
  }
  pending_.push_back({done, called, what});
  return absl::OkStatus();
}

absl::StatusOr<cudaEvent_t> NcclCommunicator::TakeEvent() {
  if (!spare_events_.empty()) {
    cudaEvent_t event = spare_events_.back();
    spare_events_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void NcclCommunicator::RecycleEvents() {
  for (const Pending& pending : pending_) spare_events_.push_back(pending.done);
  pending_.clear();
}

// Each collective's deadline runs from its call, so a stream-ordered collective gets the
// same time as one waited for at once, however many are in flight.
absl::StatusOr<bool> NcclCommunicator::CollectivesCompleted() {
  RETURN_IF_ERROR(failed_);
  if (pending_.empty()) return true;
  RETURN_IF_ERROR(StillLaunching(pending_.front().what).status());
  while (!pending_.empty()) {
    const Pending oldest = pending_.front();
    const cudaError_t finished = QueryEvent(oldest.done);
    if (finished == cudaErrorNotReady) {
      if (absl::Now() > oldest.called + options_.timeout) return Overdue(oldest.what);
      return false;
    }
    if (finished != cudaSuccess) return AbortLocked(CudaStatus(finished, oldest.what));
    spare_events_.push_back(oldest.done);
    pending_.pop_front();
  }
  return true;
}

absl::Status NcclCommunicator::WaitForCompletion() {
  return WaitForCollectives(options_.poll_interval);
}

absl::Status NcclCommunicator::FollowCaller() {
  RETURN_IF_ERROR(failed_);
  if (!options_.stream_of_caller) return absl::OkStatus();
  const cudaStream_t caller = options_.stream_of_caller();
  if (caller == stream_) return absl::OkStatus();
  RETURN_IF_CUDA_ERROR(cudaEventRecord(caller_, caller));
  RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream_, caller_, 0));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::OrderCallerAfter() {
  if (!options_.stream_of_caller || pending_.empty()) return absl::OkStatus();
  const cudaStream_t caller = options_.stream_of_caller();
  if (caller == stream_) return absl::OkStatus();
  RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(caller, pending_.back().done, 0));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Finish(ncclResult_t result, const char* what) {
  const absl::Time called = absl::Now();
  if (result != ncclSuccess && result != ncclInProgress) {
    return AbortLocked(NcclStatus(result, what));
  }
  if (grouping_) return absl::OkStatus();
  RETURN_IF_ERROR(WaitEnqueued(what, called));
  const bool may_return_enqueued = options_.stream_ordered && !options_.synchronous;
  return may_return_enqueued ? OrderCallerAfter() : WaitForCompletion();
}

absl::Status NcclCommunicator::BeginGroup() {
  RETURN_IF_ERROR(failed_);
  RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
  grouping_ = true;
  return absl::OkStatus();
}

absl::Status NcclCommunicator::EndGroup() {
  grouping_ = false;
  // Ended even after a failure inside it: a group left open on this thread would defer
  // every later NCCL call of the thread, on any communicator, until it hung.
  const ncclResult_t ended = ncclGroupEnd();
  RETURN_IF_ERROR(failed_);
  return Finish(ended, "grouped collectives");
}

absl::Status NcclCommunicator::AllGather(const void* shard, size_t shard_numel, void* out,
                                         ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  stats_.all_gather_bytes += static_cast<int64_t>(shard_numel * size_ * ElementSize(type));
  return Finish(ncclAllGather(shard, out, shard_numel, NcclType(type), comm_, stream_),
                "all-gather");
}

absl::Status NcclCommunicator::ReduceScatter(void* in, size_t shard_numel, void* shard,
                                             ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  stats_.reduce_scatter_bytes += static_cast<int64_t>(shard_numel * size_ * ElementSize(type));
  return Finish(ncclReduceScatter(in, shard, shard_numel, NcclType(type), ncclSum, comm_, stream_),
                "reduce-scatter");
}

absl::Status NcclCommunicator::AllReduce(void* data, size_t numel, ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  stats_.all_reduce_bytes += static_cast<int64_t>(numel * ElementSize(type));
  return Finish(ncclAllReduce(data, data, numel, NcclType(type), ncclSum, comm_, stream_),
                "all-reduce");
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t numel, int root, ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  return Finish(ncclBroadcast(data, data, numel, NcclType(type), root, comm_, stream_),
                "broadcast");
}

absl::Status NcclCommunicator::Barrier() {
  RETURN_IF_ERROR(FollowCaller());
  RETURN_IF_ERROR(
      Finish(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_),
             "barrier"));
  return WaitForCompletion();
}

}  // namespace shardwise::cuda
