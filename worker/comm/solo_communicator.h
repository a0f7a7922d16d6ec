#ifndef SHARDWISE_WORKER_COMM_SOLO_COMMUNICATOR_H_
#define SHARDWISE_WORKER_COMM_SOLO_COMMUNICATOR_H_

// The group of one rank: every collective is a copy or nothing. Serves the trivial shard
// group of NO_SHARD and the trivial replicate group of unreplicated strategies.

#include <algorithm>

#include "worker/comm/communicator.h"

namespace shardwise {

class SoloCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllGather(const float* shard, size_t numel, float* out) override {
    std::copy(shard, shard + numel, out);
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(float* in, size_t numel, float* shard) override {
    std::copy(in, in + numel, shard);
    return absl::OkStatus();
  }
  absl::Status AllReduce(float*, size_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(float*, size_t, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_SOLO_COMMUNICATOR_H_
