#ifndef SHARDWISE_WORKER_COMM_TRACKED_COMMUNICATOR_H_
#define SHARDWISE_WORKER_COMM_TRACKED_COMMUNICATOR_H_

// A communicator that records in a RankPosition which collective its rank is inside, and
// since when, adds a span to a Timeline, and counts the call and its time in the
// worker's CollectiveMetrics, around every call to the communicator it wraps (not owned).
// The heartbeat carries that position, so the coordinator can tell which ranks keep the
// others waiting. Traffic counters stay with the wrapped communicator. Any recorder may
// be null.

#include "absl/time/clock.h"
#include "worker/comm/collective_metrics.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/rank_position.h"
#include "worker/runtime/timeline.h"

namespace shardwise {

class TrackedCommunicator final : public Communicator {
 public:
  TrackedCommunicator(Communicator* inner, RankPosition* position, Timeline* timeline,
                      CollectiveMetrics* metrics = nullptr)
      : inner_(inner), position_(position), timeline_(timeline), metrics_(metrics) {}

  using Communicator::AllGather;
  using Communicator::AllReduce;
  using Communicator::Broadcast;
  using Communicator::ReduceScatter;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status AllGather(const void* shard, size_t numel, void* out, ScalarType type) override {
    Scope scope(position_, timeline_, metrics_, "all-gather");
    return inner_->AllGather(shard, numel, out, type);
  }
  absl::Status ReduceScatter(void* in, size_t numel, void* shard, ScalarType type) override {
    Scope scope(position_, timeline_, metrics_, "reduce-scatter");
    return inner_->ReduceScatter(in, numel, shard, type);
  }
  absl::Status AllReduce(void* data, size_t numel, ScalarType type) override {
    Scope scope(position_, timeline_, metrics_, "all-reduce");
    return inner_->AllReduce(data, numel, type);
  }
  absl::Status Broadcast(void* data, size_t numel, int root, ScalarType type) override {
    Scope scope(position_, timeline_, metrics_, "broadcast");
    return inner_->Broadcast(data, numel, root, type);
  }
  void SetTimeout(std::chrono::milliseconds timeout) override { inner_->SetTimeout(timeout); }
  absl::Status Barrier() override {
    Scope scope(position_, timeline_, metrics_, "barrier");
    return inner_->Barrier();
  }
  // Not counted as collectives: the ranks' counts must pair up, and only a pair sends.
  absl::Status SendBuffers(const std::vector<absl::Span<const char>>& buffers, int peer) override {
    return inner_->SendBuffers(buffers, peer);
  }
  absl::Status RecvBuffers(const std::vector<absl::Span<char>>& buffers, int peer) override {
    return inner_->RecvBuffers(buffers, peer);
  }
  // A stream-ordered collective returns once enqueued; while its completion is polled
  // and not there, the rank's position shows the lane waiting in "completion" (not
  // counted as a collective of its own), so a peer that never joins is still named.
  bool stream_ordered() const override { return inner_->stream_ordered(); }
  // One thread polls (the lane's), as it makes the calls.
  absl::StatusOr<bool> CollectivesCompleted() override {
    absl::StatusOr<bool> completed = inner_->CollectivesCompleted();
    if (position_ == nullptr) return completed;
    if (completed.ok() && !*completed) {
      // From the first poll that found it waiting, across later collectives' calls.
      if (awaiting_since_ == absl::InfinitePast()) awaiting_since_ = absl::Now();
      position_->AwaitCollectives("completion", timeline_lane, awaiting_since_);
    } else if (awaiting_since_ != absl::InfinitePast()) {
      // Only this group's own wait ends here: another group polled on the same lane (the
      // reduction's shard and replicate groups) may still be waiting.
      awaiting_since_ = absl::InfinitePast();
      position_->ExitCollective(timeline_lane);
    }
    return completed;
  }

 private:
  class Scope {
   public:
    Scope(RankPosition* position, Timeline* timeline, CollectiveMetrics* metrics, const char* name)
        : position_(position),
          span_(timeline, name),
          metrics_(metrics),
          name_(name),
          lane_(timeline_lane),
          start_(metrics != nullptr ? absl::Now() : absl::InfinitePast()) {
      if (position_ != nullptr) position_->EnterCollective(name, lane_);
    }
    ~Scope() {
      if (position_ != nullptr) position_->ExitCollective(lane_);
      if (metrics_ != nullptr) metrics_->Record(name_, absl::Now() - start_);
    }

   private:
    RankPosition* const position_;
    ScopedSpan span_;
    CollectiveMetrics* const metrics_;
    const char* const name_;
    const int lane_;  // the calling thread's
    const absl::Time start_;
  };

  Communicator* const inner_;
  absl::Time awaiting_since_ = absl::InfinitePast();  // CollectivesCompleted's
  RankPosition* const position_;
  Timeline* const timeline_;
  CollectiveMetrics* const metrics_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_TRACKED_COMMUNICATOR_H_
