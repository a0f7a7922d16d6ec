#include "worker/comm/gloo_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "worker/comm/prefixed_store.h"
#include "worker/compute/casts.h"

namespace shardwise {
namespace {

template <typename Fn>
absl::Status Guard(const char* what, const GlooCommunicator& self, Fn&& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(what, " on ", self.Who(), ": ", e.what()));
  }
}

// Gloo's reduction signature: out[i] = a[i] + b[i] (out may alias a or b).
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
void Sum(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

// 16-bit floats add in FP32 and round once, to nearest even.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void Sum16(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = Narrow(Widen(x[i]) + Widen(y[i]));
}

ReduceFn SumOf(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
      return &Sum<float>;
    case ScalarType::kFloat16:
      return &Sum16<cpu::HalfToFloat, cpu::FloatToHalf>;
    case ScalarType::kBFloat16:
      return &Sum16<cpu::BFloat16ToFloat, cpu::FloatToBFloat16>;
    case ScalarType::kInt64:
      return &Sum<int64_t>;
    case ScalarType::kFloat64:
      return &Sum<double>;
  }
  return nullptr;
}

// Gloo's options take typed pointers to learn the element size.
template <typename Options>
void SetOutput(Options& opts, void* data, size_t n, ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
      opts.setOutput(static_cast<float*>(data), n);
      break;
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      opts.setOutput(static_cast<uint16_t*>(data), n);
      break;
    case ScalarType::kInt64:
      opts.setOutput(static_cast<int64_t*>(data), n);
      break;
    case ScalarType::kFloat64:
      opts.setOutput(static_cast<double*>(data), n);
      break;
  }
}

template <typename Options>
void SetInput(Options& opts, const void* data, size_t n, ScalarType type) {
  void* mutable_data = const_cast<void*>(data);  // Gloo's API is not const-correct
  switch (type) {
    case ScalarType::kFloat32:
      opts.setInput(static_cast<float*>(mutable_data), n);
      break;
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      opts.setInput(static_cast<uint16_t*>(mutable_data), n);
      break;
    case ScalarType::kInt64:
      opts.setInput(static_cast<int64_t*>(mutable_data), n);
      break;
    case ScalarType::kFloat64:
      opts.setInput(static_cast<double*>(mutable_data), n);
      break;
  }
}

// The slot of point-to-point messages: a prefix Gloo's collectives do not use, and no
// context slot (nextSlot), whose sequence must stay the same on every rank of the group
// while only a pair of them send.
constexpr uint8_t kPointToPointSlotPrefix = 0x70;

}  // namespace

GlooCommunicator::GlooCommunicator(std::shared_ptr<gloo::Context> context, std::string group)
    : context_(std::move(context)), group_(std::move(group)) {}

std::string GlooCommunicator::Who() const {
  return group_.empty() ? absl::StrCat("rank ", rank())
                        : absl::StrCat("rank ", rank(), " of group '", group_, "'");
}

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::ConnectGroup(
    gloo::rendezvous::Store& store, const std::string& name, const std::vector<int>& ranks,
    int global_rank, const DataPlaneOptions& options) {
  auto it = std::find(ranks.begin(), ranks.end(), global_rank);
  if (it == ranks.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", global_rank, " is not in communicator group '", name, "'"));
  }
  // Gloo's PrefixStore would wait its own 30 s default for the peers, not the store's bound.
  PrefixedStore prefixed(name, store);
  auto context = ConnectGlooContext(prefixed, static_cast<int>(it - ranks.begin()),
                                    static_cast<int>(ranks.size()), options);
  if (!context.ok()) return context.status();
  return std::make_unique<GlooCommunicator>(*context, name);
}

absl::Status GlooCommunicator::AllGather(const void* shard, size_t shard_numel, void* out,
                                         ScalarType type) {
  const size_t chunk_bytes = shard_numel * ElementSize(type);
  stats_.all_gather_bytes += static_cast<int64_t>(chunk_bytes * size());
  if (size() == 1) {
    std::memcpy(out, shard, chunk_bytes);
    return absl::OkStatus();
  }
  return Guard("all-gather", *this, [&] {
    gloo::AllgatherOptions opts(context_);
    SetInput(opts, shard, shard_numel, type);
    SetOutput(opts, out, shard_numel * size(), type);
    gloo::allgather(opts);
  });
}

// Ring reduce-scatter: in step s (0 <= s < size-1) each rank sends its partial sum of
// chunk (rank - s - 1) to its right neighbour and adds the partial of chunk (rank - s - 2)
// received from its left neighbour. Chunk c starts at rank c+1 and travels once round
// the ring, so after size-1 steps rank r holds the full sum of chunk r, having sent and
// received (size-1)/size of the buffer: the optimal traffic.
absl::Status GlooCommunicator::ReduceScatter(void* in, size_t shard_numel, void* shard,
                                             ScalarType type) {
  const int n = size();
  const int r = rank();
  const size_t chunk_bytes = shard_numel * ElementSize(type);
  stats_.reduce_scatter_bytes += static_cast<int64_t>(chunk_bytes * n);
  char* work = static_cast<char*>(in);  // partial sums accumulate in place
  if (n == 1) {
    std::memcpy(shard, work, chunk_bytes);
    return absl::OkStatus();
  }
  const ReduceFn sum = SumOf(type);
  incoming_.resize(chunk_bytes);
  auto chunk = [&](int c) { return ((c % n) + n) % n; };
  return Guard("reduce-scatter", *this, [&] {
    const int right = (r + 1) % n;
    const int left = (r - 1 + n) % n;
    auto send = context_->createUnboundBuffer(work, chunk_bytes * n);
    auto recv = context_->createUnboundBuffer(incoming_.data(), chunk_bytes);
    const uint64_t slot = context_->nextSlot();
    for (int s = 0; s < n - 1; ++s) {
      send->send(right, slot, chunk(r - s - 1) * chunk_bytes, chunk_bytes);
      recv->recv(left, slot, 0, chunk_bytes);
      recv->waitRecv(context_->getTimeout());
      char* target = work + chunk(r - s - 2) * chunk_bytes;
      sum(target, target, incoming_.data(), shard_numel);
      send->waitSend(context_->getTimeout());
    }
    std::memcpy(shard, work + r * chunk_bytes, chunk_bytes);
  });
}

absl::Status GlooCommunicator::AllReduce(void* data, size_t numel, ScalarType type) {
  stats_.all_reduce_bytes += static_cast<int64_t>(numel * ElementSize(type));
  if (size() == 1) return absl::OkStatus();
  return Guard("all-reduce", *this, [&] {
    gloo::AllreduceOptions opts(context_);
    SetOutput(opts, data, numel, type);
    opts.setReduceFunction(SumOf(type));
    gloo::allreduce(opts);
  });
}

absl::Status GlooCommunicator::Broadcast(void* data, size_t numel, int root, ScalarType type) {
  if (size() == 1) return absl::OkStatus();
  return Guard("broadcast", *this, [&] {
    gloo::BroadcastOptions opts(context_);
    SetOutput(opts, data, numel, type);
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

absl::Status GlooCommunicator::SendBuffers(const std::vector<absl::Span<const char>>& buffers,
                                           int peer) {
  return Guard("send", *this, [&] {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> posted;
    for (absl::Span<const char> buffer : buffers) {
      if (buffer.empty()) continue;  // the receiver skips it too
      posted.push_back(
          context_->createUnboundBuffer(const_cast<char*>(buffer.data()), buffer.size()));
      posted.back()->send(peer, gloo::Slot::build(kPointToPointSlotPrefix, 0));
    }
    for (auto& buffer : posted) buffer->waitSend(context_->getTimeout());
  });
}

absl::Status GlooCommunicator::RecvBuffers(const std::vector<absl::Span<char>>& buffers, int peer) {
  return Guard("receive", *this, [&] {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> posted;
    for (absl::Span<char> buffer : buffers) {
      if (buffer.empty()) continue;
      posted.push_back(context_->createUnboundBuffer(buffer.data(), buffer.size()));
      posted.back()->recv(peer, gloo::Slot::build(kPointToPointSlotPrefix, 0));
    }
    for (auto& buffer : posted) buffer->waitRecv(context_->getTimeout());
  });
}

absl::Status GlooCommunicator::Barrier() {
  if (size() == 1) return absl::OkStatus();
  return Guard("barrier", *this, [&] {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  });
}

}  // namespace shardwise
