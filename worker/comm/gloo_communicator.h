#ifndef SHARDWISE_WORKER_COMM_GLOO_COMMUNICATOR_H_
#define SHARDWISE_WORKER_COMM_GLOO_COMMUNICATOR_H_

// Communicator over a Gloo context (TCP). Gloo reports errors by throwing; here they
// become UNAVAILABLE (a peer went away) or DEADLINE_EXCEEDED-like messages.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gloo/context.h"
#include "gloo/rendezvous/store.h"
#include "worker/comm/communicator.h"
#include "worker/comm/data_plane.h"

namespace shardwise {

class GlooCommunicator final : public Communicator {
 public:
  // `group` names the group in errors (its ranks counted within it): "all-gather on rank
  // 1 of group 'shard2'"; empty: the world's.
  explicit GlooCommunicator(std::shared_ptr<gloo::Context> context, std::string group = "");

  // Connects the group `ranks` (global ranks, in group order; must contain `global_rank`)
  // through `store` under `name`, so several groups can share one rendezvous.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> ConnectGroup(
      gloo::rendezvous::Store& store, const std::string& name, const std::vector<int>& ranks,
      int global_rank, const DataPlaneOptions& options);

  using Communicator::AllGather;
  using Communicator::AllReduce;
  using Communicator::Broadcast;
  using Communicator::ReduceScatter;

  // How long an operation waits for a peer (the connection's timeout until set).
  void SetTimeout(std::chrono::milliseconds timeout) override { context_->setTimeout(timeout); }
  // Closes this rank's connections: peers waiting on it in an operation fail at once, and
  // so does its own next operation.
  void CloseConnections() { context_->closeConnections(); }

  int rank() const override { return context_->rank; }
  // This rank as errors name it: "rank 1 of group 'shard2'", or "rank 3" in the world.
  std::string Who() const;
  int size() const override { return context_->size; }
  absl::Status AllGather(const void* shard, size_t shard_numel, void* out,
                         ScalarType type) override;
  absl::Status ReduceScatter(void* in, size_t shard_numel, void* shard, ScalarType type) override;
  absl::Status AllReduce(void* data, size_t numel, ScalarType type) override;
  absl::Status Broadcast(void* data, size_t numel, int root, ScalarType type) override;
  absl::Status Barrier() override;
  absl::Status SendBuffers(const std::vector<absl::Span<const char>>& buffers, int peer) override;
  absl::Status RecvBuffers(const std::vector<absl::Span<char>>& buffers, int peer) override;

 private:
  std::shared_ptr<gloo::Context> context_;
  const std::string group_;     // empty: the world
  std::vector<char> incoming_;  // reduce-scatter's receive chunk
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_GLOO_COMMUNICATOR_H_
