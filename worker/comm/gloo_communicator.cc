#include "worker/comm/gloo_communicator.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/prefix_store.h"

namespace shardwise {
namespace {

template <typename Fn>
absl::Status Guard(const char* what, int rank, Fn&& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(what, " on rank ", rank, ": ", e.what()));
  }
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);
const ReduceFn kSumFloat = &gloo::sum<float>;

}  // namespace

GlooCommunicator::GlooCommunicator(std::shared_ptr<gloo::Context> context)
    : context_(std::move(context)) {}

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::ConnectGroup(
    gloo::rendezvous::Store& store, const std::string& name, const std::vector<int>& ranks,
    int global_rank, const DataPlaneOptions& options) {
  auto it = std::find(ranks.begin(), ranks.end(), global_rank);
  if (it == ranks.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", global_rank, " is not in communicator group '", name, "'"));
  }
  gloo::rendezvous::PrefixStore prefixed(name, store);
  auto context = ConnectGlooContext(prefixed, static_cast<int>(it - ranks.begin()),
                                    static_cast<int>(ranks.size()), options);
  if (!context.ok()) return context.status();
  return std::make_unique<GlooCommunicator>(*context);
}

absl::Status GlooCommunicator::AllGather(const float* shard, size_t shard_numel, float* out) {
  stats_.all_gather_bytes += static_cast<int64_t>(shard_numel * size() * sizeof(float));
  if (size() == 1) {
    std::copy(shard, shard + shard_numel, out);
    return absl::OkStatus();
  }
  return Guard("all-gather", rank(), [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float*>(shard), shard_numel);
    opts.setOutput(out, shard_numel * size());
    gloo::allgather(opts);
  });
}

// Ring reduce-scatter: in step s (0 <= s < size-1) each rank sends its partial sum of
// chunk (rank - s - 1) to its right neighbour and adds the partial of chunk (rank - s - 2)
// received from its left neighbour. Chunk c starts at rank c+1 and travels once round
// the ring, so after size-1 steps rank r holds the full sum of chunk r, having sent and
// received (size-1)/size of the buffer: the optimal traffic.
absl::Status GlooCommunicator::ReduceScatter(float* in, size_t shard_numel, float* shard) {
  const int n = size();
  const int r = rank();
  stats_.reduce_scatter_bytes += static_cast<int64_t>(shard_numel * n * sizeof(float));
  if (n == 1) {
    std::copy(in, in + shard_numel, shard);
    return absl::OkStatus();
  }
  const size_t chunk_bytes = shard_numel * sizeof(float);
  float* work = in;  // partial sums accumulate in place
  incoming_.resize(shard_numel);
  float* incoming = incoming_.data();
  auto chunk = [&](int c) { return ((c % n) + n) % n; };
  return Guard("reduce-scatter", r, [&] {
    const int right = (r + 1) % n;
    const int left = (r - 1 + n) % n;
    auto send = context_->createUnboundBuffer(work, shard_numel * n * sizeof(float));
    auto recv = context_->createUnboundBuffer(incoming, chunk_bytes);
    const uint64_t slot = context_->nextSlot();
    for (int s = 0; s < n - 1; ++s) {
      send->send(right, slot, chunk(r - s - 1) * chunk_bytes, chunk_bytes);
      recv->recv(left, slot, 0, chunk_bytes);
      recv->waitRecv(context_->getTimeout());
      float* target = work + chunk(r - s - 2) * shard_numel;
      for (size_t i = 0; i < shard_numel; ++i) target[i] += incoming[i];
      send->waitSend(context_->getTimeout());
    }
    std::copy(work + r * shard_numel, work + (r + 1) * shard_numel, shard);
  });
}

absl::Status GlooCommunicator::AllReduce(float* data, size_t numel) {
  stats_.all_reduce_bytes += static_cast<int64_t>(numel * sizeof(float));
  if (size() == 1) return absl::OkStatus();
  return Guard("all-reduce", rank(), [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, numel);
    opts.setReduceFunction(kSumFloat);
    gloo::allreduce(opts);
  });
}

absl::Status GlooCommunicator::Broadcast(float* data, size_t numel, int root) {
  if (size() == 1) return absl::OkStatus();
  return Guard("broadcast", rank(), [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data, numel);
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

absl::Status GlooCommunicator::Barrier() {
  if (size() == 1) return absl::OkStatus();
  return Guard("barrier", rank(), [&] {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  });
}

}  // namespace shardwise
