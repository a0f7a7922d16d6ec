#ifndef SHARDWISE_WORKER_COMM_COMMUNICATOR_H_
#define SHARDWISE_WORKER_COMM_COMMUNICATOR_H_

// The collectives the FSDP runtime needs, over one group of ranks, in FP32, FP16, BF16 or
// INT64. Device-neutral: Gloo implements it on CPUs (gloo_communicator.h), NCCL on GPUs
// (cuda/nccl_communicator.h). All reductions are SUM.
// Every rank of the group must call the same collectives in the same order.
//
// Thread-safety: one collective at a time per communicator.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise {

struct CommStats {
  int64_t all_gather_bytes = 0;      // bytes of the full (gathered) buffers
  int64_t reduce_scatter_bytes = 0;  // bytes of the full (unreduced) buffers
  int64_t all_reduce_bytes = 0;

  CommStats& operator+=(const CommStats& other) {
    all_gather_bytes += other.all_gather_bytes;
    reduce_scatter_bytes += other.reduce_scatter_bytes;
    all_reduce_bytes += other.all_reduce_bytes;
    return *this;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Counts are in elements of `type`. FP16 and BF16 sums add in FP32 and round once per
  // addition (to nearest even); INT64 sums are exact.
  //
  // out[size * shard_numel] = the shards of every rank, in rank order.
  virtual absl::Status AllGather(const void* shard, size_t shard_numel, void* out,
                                 ScalarType type) = 0;
  // shard[shard_numel] = chunk `rank` of the sum over ranks of in[size * shard_numel].
  // `in` is working space: its contents are undefined afterwards (FSDP's unsharded
  // gradient is freed right after, so reducing in place saves a copy of the full buffer).
  virtual absl::Status ReduceScatter(void* in, size_t shard_numel, void* shard,
                                     ScalarType type) = 0;
  virtual absl::Status AllReduce(void* data, size_t numel, ScalarType type) = 0;
  virtual absl::Status Broadcast(void* data, size_t numel, int root, ScalarType type) = 0;
  virtual absl::Status Barrier() = 0;

  // How long a collective called from now on waits for its peers before it fails (each
  // communicator's own until set: the data plane's timeout). A group whose peers are
  // expected to be late for a known time (the final model's writer, writing between its
  // all-gathers) waits that much longer. Ignored where nothing waits (one rank).
  virtual void SetTimeout(std::chrono::milliseconds timeout) {}

  // Whether collectives return once they are ordered on the device's stream rather than
  // once they completed (NCCL with NcclOptions::stream_ordered): the results are then
  // there for work that follows on that stream, and CollectivesCompleted() is where the
  // host learns that they completed, or how they failed.
  virtual bool stream_ordered() const { return false; }
  // Without waiting: whether every collective called so far has completed; an error once
  // one failed (a stream-ordered communicator runs its watchdog's checks here: aborts,
  // peers' errors, the deadline). True where collectives complete before returning.
  virtual absl::StatusOr<bool> CollectivesCompleted() { return true; }
  // Blocks until every collective called so far has completed (or one failed), polling
  // CollectivesCompleted every `poll`: for a caller that reads a result on the host or
  // from another stream. At once where collectives complete before returning.
  absl::Status WaitForCollectives(absl::Duration poll = absl::Microseconds(50));

  // Point to point, in host memory: `buffers`, in order, to or from rank `peer` of the
  // group, which makes the matching call with buffers of the same sizes; the other ranks
  // take no part. Every buffer is posted before any is waited for, so the pair's
  // per-message handshakes overlap. UNIMPLEMENTED where the group's transport has no such
  // calls (the device groups: a membership change's state moves over the host world
  // group).
  virtual absl::Status SendBuffers(const std::vector<absl::Span<const char>>& buffers, int peer) {
    return absl::UnimplementedError("this communicator has no point-to-point sends");
  }
  virtual absl::Status RecvBuffers(const std::vector<absl::Span<char>>& buffers, int peer) {
    return absl::UnimplementedError("this communicator has no point-to-point receives");
  }
  absl::Status Send(const void* data, size_t bytes, int peer) {
    return SendBuffers({absl::Span<const char>(static_cast<const char*>(data), bytes)}, peer);
  }
  absl::Status Recv(void* data, size_t bytes, int peer) {
    return RecvBuffers({absl::Span<char>(static_cast<char*>(data), bytes)}, peer);
  }

  // FP32 conveniences.
  absl::Status AllGather(const float* shard, size_t shard_numel, float* out) {
    return AllGather(shard, shard_numel, out, ScalarType::kFloat32);
  }
  absl::Status ReduceScatter(float* in, size_t shard_numel, float* shard) {
    return ReduceScatter(in, shard_numel, shard, ScalarType::kFloat32);
  }
  absl::Status AllReduce(float* data, size_t numel) {
    return AllReduce(data, numel, ScalarType::kFloat32);
  }
  absl::Status Broadcast(float* data, size_t numel, int root) {
    return Broadcast(data, numel, root, ScalarType::kFloat32);
  }

  const CommStats& stats() const { return stats_; }

 protected:
  CommStats stats_;
};

// Calls `completed` every `poll` until it answers true (OK) or an error (returned): the
// wait for collectives, whoever watches them (a communicator, or a task over several).
inline absl::Status PollUntilCompleted(const std::function<absl::StatusOr<bool>()>& completed,
                                       absl::Duration poll) {
  for (;;) {
    const absl::StatusOr<bool> done = completed();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    absl::SleepFor(poll);
  }
}

inline absl::Status Communicator::WaitForCollectives(absl::Duration poll) {
  return PollUntilCompleted([this] { return CollectivesCompleted(); }, poll);
}

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_COMMUNICATOR_H_
