#ifndef SHARDWISE_WORKER_RUNTIME_STREAM_CLOCK_H_
#define SHARDWISE_WORKER_RUNTIME_STREAM_CLOCK_H_

// Marks on a device's streams, so a timeline can show what the device ran and when, not
// only when the host threads enqueued it. The CUDA device implements it with CUDA events
// (cuda/stream_clock.h); the CPU runs every operation as it is called and has none.
//
// Thread-safety: implementations are thread-safe.

#include <cstdint>
#include <memory>
#include <optional>

namespace shardwise {

// Timeline lanes (Span.lane) of a device's streams.
inline constexpr int kComputeStreamLane = 10;
inline constexpr int kUnshardStreamLane = 11;
inline constexpr int kPostBackwardStreamLane = 12;
inline constexpr int kAllReduceStreamLane = 13;

class StreamClock {
 public:
  class Mark {
   public:
    virtual ~Mark() = default;
  };

  virtual ~StreamClock() = default;
  // A mark at the current end of the calling thread's stream, and that stream's lane.
  virtual std::unique_ptr<Mark> Record(int* lane) = 0;
  // When the device passed `mark`, in microseconds since the Unix epoch on the host's
  // clock; nullopt while it has not (or never will: the device failed).
  virtual std::optional<int64_t> PassedAt(const Mark& mark) = 0;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_STREAM_CLOCK_H_
