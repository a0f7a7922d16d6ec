#include "worker/testing/stream_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardwise::testing {

absl::Status StreamCommunicator::FirstError() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::Status StreamCommunicator::Issue(const char* what, size_t numel,
                                       std::function<absl::Status()> collective, bool wait) {
  RETURN_IF_ERROR(FirstError());
  if (options_.on_issue) options_.on_issue(absl::StrCat(what, " ", numel));
  if (options_.follow_caller) device_->OrderAfterCaller(*stream_);
  {
    absl::MutexLock lock(&mu_);
    ++issued_;
  }
  stream_->Enqueue([this, collective = std::move(collective)] {
    const absl::Status status = collective();
    absl::MutexLock lock(&mu_);
    ++completed_;
    if (!status.ok() && failed_.ok()) failed_ = status;
  });
  if (options_.stream_ordered && !wait) {
    // On a stream of its own (the all-reduce lane's): the caller's stream follows it.
    if (options_.follow_caller) device_->OrderCallerAfter(*stream_);
    return absl::OkStatus();
  }
  stream_->Drain();
  return FirstError();
}

absl::Status StreamCommunicator::AllGather(const void* shard, size_t shard_numel, void* out,
                                           ScalarType type) {
  return Issue("all_gather", shard_numel,
               [=] { return host_->AllGather(shard, shard_numel, out, type); });
}

absl::Status StreamCommunicator::ReduceScatter(void* in, size_t shard_numel, void* shard,
                                               ScalarType type) {
  return Issue("reduce_scatter", shard_numel,
               [=] { return host_->ReduceScatter(in, shard_numel, shard, type); });
}

absl::Status StreamCommunicator::AllReduce(void* data, size_t numel, ScalarType type) {
  return Issue("all_reduce", numel, [=] { return host_->AllReduce(data, numel, type); });
}

absl::Status StreamCommunicator::Broadcast(void* data, size_t numel, int root, ScalarType type) {
  return Issue("broadcast", numel, [=] { return host_->Broadcast(data, numel, root, type); });
}

// A barrier nobody waits for orders nothing: it always waits (as NCCL's).
absl::Status StreamCommunicator::Barrier() {
  return Issue(
      "barrier", 0, [this] { return host_->Barrier(); }, /*wait=*/true);
}

absl::StatusOr<bool> StreamCommunicator::CollectivesCompleted() {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  return completed_ == issued_;
}

}  // namespace shardwise::testing
