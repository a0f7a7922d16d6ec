#ifndef SHARDWISE_WORKER_COMM_TRACKED_COMMUNICATOR_H_
#define SHARDWISE_WORKER_COMM_TRACKED_COMMUNICATOR_H_

// A communicator that records in a RankPosition which collective its rank is inside, and
// since when, and adds a span to a Timeline, around every call to the communicator it
// wraps (not owned). The heartbeat carries that position, so the coordinator can tell
// which ranks keep the others waiting. Traffic counters stay with the wrapped
// communicator. Either recorder may be null.

#include "worker/comm/communicator.h"
#include "worker/runtime/rank_position.h"
#include "worker/runtime/timeline.h"

namespace shardwise {

class TrackedCommunicator final : public Communicator {
 public:
  TrackedCommunicator(Communicator* inner, RankPosition* position, Timeline* timeline)
      : inner_(inner), position_(position), timeline_(timeline) {}

  using Communicator::AllGather;
  using Communicator::AllReduce;
  using Communicator::Broadcast;
  using Communicator::ReduceScatter;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status AllGather(const void* shard, size_t numel, void* out, ScalarType type) override {
    Scope scope(position_, timeline_, "all-gather");
    return inner_->AllGather(shard, numel, out, type);
  }
  absl::Status ReduceScatter(void* in, size_t numel, void* shard, ScalarType type) override {
    Scope scope(position_, timeline_, "reduce-scatter");
    return inner_->ReduceScatter(in, numel, shard, type);
  }
  absl::Status AllReduce(void* data, size_t numel, ScalarType type) override {
    Scope scope(position_, timeline_, "all-reduce");
    return inner_->AllReduce(data, numel, type);
  }
  absl::Status Broadcast(void* data, size_t numel, int root, ScalarType type) override {
    Scope scope(position_, timeline_, "broadcast");
    return inner_->Broadcast(data, numel, root, type);
  }
  absl::Status Barrier() override {
    Scope scope(position_, timeline_, "barrier");
    return inner_->Barrier();
  }

 private:
  class Scope {
   public:
    Scope(RankPosition* position, Timeline* timeline, const char* name)
        : position_(position), span_(timeline, name), lane_(timeline_lane) {
      if (position_ != nullptr) position_->EnterCollective(name, lane_);
    }
    ~Scope() {
      if (position_ != nullptr) position_->ExitCollective(lane_);
    }

   private:
    RankPosition* const position_;
    ScopedSpan span_;
    const int lane_;  // the calling thread's
  };

  Communicator* const inner_;
  RankPosition* const position_;
  Timeline* const timeline_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_TRACKED_COMMUNICATOR_H_
