#include "worker/cuda/nccl_communicator.h"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
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

// Waits, polling, until a non-blocking communicator has finished its last call; the
// result is that call's (or an error's). `query` is ncclCommGetAsyncError on it.
template <typename Query>
ncclResult_t PollAsync(Query&& query, absl::Time deadline, absl::Duration poll, bool* timed_out) {
  *timed_out = false;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = query(&state);
    if (queried != ncclSuccess) return queried;
    if (state != ncclInProgress) return state;
    if (Clock::Real().Now() > deadline) {
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
    try {
      store.set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("NCCL group '", name, "': publishing the unique id: ", e.what()));
    }
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
    if (comm != nullptr) ncclCommAbort(comm);
    return NcclStatus(started, "ncclCommInitRankConfig");
  }
  bool timed_out = false;
  const ncclResult_t ready =
      PollAsync([comm](ncclResult_t* state) { return ncclCommGetAsyncError(comm, state); },
                Clock::Real().Now() + options.timeout, options.poll_interval, &timed_out);
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
  // The barrier sums whatever the word holds; a defined value keeps memory checkers quiet.
  RETURN_IF_CUDA_ERROR(cudaMemsetAsync(communicator->barrier_word_, 0, sizeof(int), stream));
  return communicator;
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int size, cudaStream_t stream,
                                   const NcclOptions& options)
    : handle_(comm, options.abort_function),
      rank_(rank),
      size_(size),
      stream_(stream),
      options_(options),
      timeout_ms_(absl::ToInt64Milliseconds(options.timeout)) {}

NcclCommunicator::~NcclCommunicator() {
  // A healthy communicator is finalized (which flushes its work) and destroyed; one whose
  // finalization fails or outlasts the timeout, or whose job was aborted, is aborted.
  if (!handle_.aborted()) {
    ncclResult_t result = handle_.Call([](ncclComm_t comm) { return ncclCommFinalize(comm); });
    bool timed_out = false;
    if (result == ncclSuccess || result == ncclInProgress) {
      result = PollAsync(
          [this](ncclResult_t* state) {
            return handle_.Call(
                [state](ncclComm_t comm) { return ncclCommGetAsyncError(comm, state); });
          },
          Clock::Real().Now() + timeout(), options_.poll_interval, &timed_out);
    }
    if (result == ncclSuccess) {
      if (ncclComm_t comm = handle_.Release(); comm != nullptr) ncclCommDestroy(comm);
    } else {
      handle_.Abort();
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
  // Now, on this thread: the owner may be blocked where it polls nothing (nccl_handle.h).
  handle_.Abort();
}

absl::Status NcclCommunicator::AbortedStatus(const char* what) {
  std::string reason;
  {
    absl::MutexLock lock(&mu_);
    reason = abort_reason_;
  }
  return absl::AbortedError(
      absl::StrCat(what, " aborted: ", reason, "; the NCCL communicator was aborted"));
}

absl::Status NcclCommunicator::AbortWith(absl::Status why) {
  if (!failed_.ok()) return failed_;
  failed_ = why;
  // A failure of its own ends the rank's other communicators too, all at once with this
  // one: a thread of the rank may be blocked on a stream that waits for one of their
  // collectives, which its peers will never finish now, and this one's abort may wait
  // for work queued behind such a collective.
  if (!abort_requested_.load() && options_.on_failure) options_.on_failure(failed_);
  handle_.Abort();  // done by on_failure already, if it was set
  RecycleEvents();  // nothing is waited for on an aborted communicator
  return failed_;
}

absl::Status NcclCommunicator::CallFailed(ncclResult_t result, const char* what) {
  // A call refused because another thread aborted the communicator names that abort.
  if (abort_requested_.load()) return AbortWith(AbortedStatus(what));
  return AbortWith(NcclStatus(result, what));
}

absl::StatusOr<bool> NcclCommunicator::StillLaunching(const char* what) {
  if (abort_requested_.load()) return AbortWith(AbortedStatus(what));
  // NCCL's asynchronous error on every poll, not only until the call is enqueued: a peer
  // lost while the collective's kernel runs is reported here, not at the deadline.
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried =
      handle_.Call([&state](ncclComm_t comm) { return ncclCommGetAsyncError(comm, &state); });
  if (queried != ncclSuccess) return CallFailed(queried, what);
  if (state != ncclSuccess && state != ncclInProgress) return AbortWith(NcclStatus(state, what));
  return state == ncclInProgress;
}

absl::Status NcclCommunicator::Overdue(const char* what) {
  return AbortWith(absl::DeadlineExceededError(
      absl::StrCat(what, " on rank ", rank_, " of ", size_, " did not finish in ",
                   absl::FormatDuration(timeout()), "; the NCCL communicator was aborted")));
}

absl::Status NcclCommunicator::WaitEnqueued(const char* what, absl::Time called) {
  const absl::Time deadline = called + timeout();
  for (;;) {
    ASSIGN_OR_RETURN(const bool launching, StillLaunching(what));
    if (!launching) break;
    if (Clock::Real().Now() > deadline) return Overdue(what);
    absl::SleepFor(options_.poll_interval);
  }
  // The collective is enqueued: one whose event cannot be taken or recorded cannot be
  // watched, so it is aborted, and no kernel of it goes on reading buffers its caller
  // frees on this error.
  absl::StatusOr<cudaEvent_t> taken = TakeEvent();
  if (!taken.ok()) return AbortWith(taken.status());
  cudaEvent_t done = *taken;
  const cudaError_t recorded = cudaEventRecord(done, stream_);
  if (recorded != cudaSuccess) {
    spare_events_.push_back(done);
    return AbortWith(CudaStatus(recorded, "cudaEventRecord"));
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
      if (Clock::Real().Now() > oldest.called + timeout()) return Overdue(oldest.what);
      return false;
    }
    if (finished != cudaSuccess) return AbortWith(CudaStatus(finished, oldest.what));
    // Aborted from another thread, a collective's kernel stops early and its event
    // passes: not a result. (The flag is set before ncclCommAbort starts.)
    if (abort_requested_.load()) return AbortWith(AbortedStatus(oldest.what));
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
  const absl::Time called = Clock::Real().Now();
  if (result != ncclSuccess && result != ncclInProgress) return CallFailed(result, what);
  if (grouping_) return absl::OkStatus();
  RETURN_IF_ERROR(WaitEnqueued(what, called));
  const bool may_return_enqueued = options_.stream_ordered && !options_.synchronous;
  return may_return_enqueued ? OrderCallerAfter() : WaitForCompletion();
}

absl::Status NcclCommunicator::BeginGroup() {
  RETURN_IF_ERROR(failed_);
  handle_.GroupOpened();
  const ncclResult_t started = ncclGroupStart();
  if (started != ncclSuccess) {
    handle_.GroupClosed();
    return NcclStatus(started, "ncclGroupStart");
  }
  grouping_ = true;
  return absl::OkStatus();
}

absl::Status NcclCommunicator::EndGroup() {
  grouping_ = false;
  // Ended even after a failure inside it: a group left open on this thread would defer
  // every later NCCL call of the thread, on any communicator, until it hung.
  const ncclResult_t ended = ncclGroupEnd();
  handle_.GroupClosed();  // an abort asked for during the group happens now
  RETURN_IF_ERROR(failed_);
  return Finish(ended, "grouped collectives");
}

absl::Status NcclCommunicator::AllGather(const void* shard, size_t shard_numel, void* out,
                                         ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  stats_.all_gather_bytes += static_cast<int64_t>(shard_numel * size_ * ElementSize(type));
  const ncclResult_t result = handle_.Call([&](ncclComm_t comm) {
    return ncclAllGather(shard, out, shard_numel, NcclType(type), comm, stream_);
  });
  return Finish(result, "all-gather");
}

absl::Status NcclCommunicator::ReduceScatter(void* in, size_t shard_numel, void* shard,
                                             ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  stats_.reduce_scatter_bytes += static_cast<int64_t>(shard_numel * size_ * ElementSize(type));
  const ncclResult_t result = handle_.Call([&](ncclComm_t comm) {
    return ncclReduceScatter(in, shard, shard_numel, NcclType(type), ncclSum, comm, stream_);
  });
  return Finish(result, "reduce-scatter");
}

absl::Status NcclCommunicator::AllReduce(void* data, size_t numel, ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  stats_.all_reduce_bytes += static_cast<int64_t>(numel * ElementSize(type));
  const ncclResult_t result = handle_.Call([&](ncclComm_t comm) {
    return ncclAllReduce(data, data, numel, NcclType(type), ncclSum, comm, stream_);
  });
  return Finish(result, "all-reduce");
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t numel, int root, ScalarType type) {
  RETURN_IF_ERROR(FollowCaller());
  const ncclResult_t result = handle_.Call([&](ncclComm_t comm) {
    return ncclBroadcast(data, data, numel, NcclType(type), root, comm, stream_);
  });
  return Finish(result, "broadcast");
}

absl::Status NcclCommunicator::Barrier() {
  RETURN_IF_ERROR(FollowCaller());
  const ncclResult_t result = handle_.Call([this](ncclComm_t comm) {
    return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm, stream_);
  });
  RETURN_IF_ERROR(Finish(result, "barrier"));
  return WaitForCompletion();
}

}  // namespace shardwise::cuda
