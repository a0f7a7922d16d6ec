#ifndef SHARDWISE_WORKER_TESTING_STREAM_COMMUNICATOR_H_
#define SHARDWISE_WORKER_TESTING_STREAM_COMMUNICATOR_H_

// The stream-ordering checker's collectives (async_cpu_device.h): a host communicator
// (Gloo) whose collectives run as tasks on one emulated stream, in that stream's order,
// as NCCL's run on a CUDA stream. Options give NCCL's two modes that matter for ordering
// (cuda/nccl_communicator.h): `stream_ordered` returns once the collective is enqueued
// (the unshard lane: the compute stream waits for it through a fence), and
// `follow_caller` first orders the stream after the calling thread's (the all-reduce
// lane, which nobody computes on) and, stream-ordered, the calling thread's stream after
// the collective. Without `stream_ordered` a collective returns once
// it ran, as NCCL's and the host-staged path's do.
//
// Thread-safety: as Communicator.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/comm/communicator.h"
#include "worker/testing/async_cpu_device.h"

namespace shardwise::testing {

struct StreamCommunicatorOptions {
  bool stream_ordered = false;
  bool follow_caller = false;
  // Called as each collective is issued, on the issuing thread, with its name and size
  // ("all_gather 96"): the order a rank launches its collectives in across its
  // communicators (LaunchLogs, async_cpu_rank_device.h).
  std::function<void(const std::string& launch)> on_issue;
};

class StreamCommunicator final : public Communicator {
 public:
  // `host` and `device` (not owned) must outlive it.
  StreamCommunicator(Communicator* host, AsyncCpuDevice* device, EmulatedStream* stream,
                     const StreamCommunicatorOptions& options)
      : host_(host), device_(device), stream_(stream), options_(options) {}
  // Waits for the collectives it issued.
  ~StreamCommunicator() override { stream_->Drain(); }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  absl::Status AllGather(const void* shard, size_t shard_numel, void* out,
                         ScalarType type) override;
  absl::Status ReduceScatter(void* in, size_t shard_numel, void* shard, ScalarType type) override;
  absl::Status AllReduce(void* data, size_t numel, ScalarType type) override;
  absl::Status Broadcast(void* data, size_t numel, int root, ScalarType type) override;
  absl::Status Barrier() override;
  bool stream_ordered() const override { return options_.stream_ordered; }
  absl::StatusOr<bool> CollectivesCompleted() override;

 private:
  // Enqueues `collective` (`what`, of `numel` elements) on the stream; waits for it
  // unless stream-ordered (or `wait`). The first collective that failed fails every
  // later call.
  absl::Status Issue(const char* what, size_t numel, std::function<absl::Status()> collective,
                     bool wait = false);
  absl::Status FirstError() const;

  Communicator* const host_;
  AsyncCpuDevice* const device_;
  EmulatedStream* const stream_;
  const StreamCommunicatorOptions options_;
  mutable absl::Mutex mu_;
  int64_t issued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_STREAM_COMMUNICATOR_H_
