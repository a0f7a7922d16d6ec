#ifndef SHARDWISE_WORKER_COMM_SOLO_COMMUNICATOR_H_
#define SHARDWISE_WORKER_COMM_SOLO_COMMUNICATOR_H_

// The group of one rank: every collective is a copy or nothing. Serves the trivial shard
// group of NO_SHARD and the trivial replicate group of unreplicated strategies.

#include <cstring>

#include "worker/comm/communicator.h"

namespace shardwise {

class SoloCommunicator final : public Communicator {
 public:
  using Communicator::AllGather;
  using Communicator::AllReduce;
  using Communicator::Broadcast;
  using Communicator::ReduceScatter;

  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllGather(const void* shard, size_t numel, void* out, ScalarType type) override {
    std::memcpy(out, shard, numel * ElementSize(type));
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(void* in, size_t numel, void* shard, ScalarType type) override {
    std::memcpy(shard, in, numel * ElementSize(type));
    return absl::OkStatus();
  }
  absl::Status AllReduce(void*, size_t, ScalarType) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int, ScalarType) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_SOLO_COMMUNICATOR_H_
