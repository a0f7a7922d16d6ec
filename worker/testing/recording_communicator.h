#ifndef SHARDWISE_WORKER_TESTING_RECORDING_COMMUNICATOR_H_
#define SHARDWISE_WORKER_TESTING_RECORDING_COMMUNICATOR_H_

// A Communicator that forwards to another and records each collective and its element
// type: the dtype probe of the mixed-precision tests.

#include <string>
#include <utility>
#include <vector>

#include "worker/comm/communicator.h"

namespace shardwise::testing {

class RecordingCommunicator final : public Communicator {
 public:
  using Communicator::AllGather;
  using Communicator::AllReduce;
  using Communicator::Broadcast;
  using Communicator::ReduceScatter;

  explicit RecordingCommunicator(Communicator* inner) : inner_(inner) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status AllGather(const void* shard, size_t n, void* out, ScalarType type) override {
    calls_.emplace_back("all-gather", type);
    return inner_->AllGather(shard, n, out, type);
  }
  absl::Status ReduceScatter(void* in, size_t n, void* shard, ScalarType type) override {
    calls_.emplace_back("reduce-scatter", type);
    return inner_->ReduceScatter(in, n, shard, type);
  }
  absl::Status AllReduce(void* data, size_t n, ScalarType type) override {
    calls_.emplace_back("all-reduce", type);
    return inner_->AllReduce(data, n, type);
  }
  absl::Status Broadcast(void* data, size_t n, int root, ScalarType type) override {
    calls_.emplace_back("broadcast", type);
    return inner_->Broadcast(data, n, root, type);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }

  const std::vector<std::pair<std::string, ScalarType>>& calls() const { return calls_; }

 private:
  Communicator* const inner_;
  std::vector<std::pair<std::string, ScalarType>> calls_;
};

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_RECORDING_COMMUNICATOR_H_
