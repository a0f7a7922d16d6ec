#ifndef SHARDWISE_WORKER_RUNTIME_TIMELINE_H_
#define SHARDWISE_WORKER_RUNTIME_TIMELINE_H_

// A rank's timeline: spans (a step; forward and backward of each unit; each collective;
// the optimizer) with wall-clock start times, kept in a bounded buffer and drained in
// batches by the progress publisher, which sends them to the coordinator. When the
// buffer is full the oldest spans are dropped and counted, so memory stays bounded
// whatever the publisher does.
//
// On a device with streams (a StreamClock attached), each span of a host thread also
// yields a device span on the lane of the stream that thread enqueues on: from when the
// stream reached the work the thread enqueued inside the span to when it finished it.
// Those wait, unresolved, until the device has passed both marks; Drain emits the
// resolved ones.
//
// Thread-safety: thread-safe.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/job.pb.h"
#include "worker/runtime/stream_clock.h"

namespace shardwise {

class Timeline {
 public:
  explicit Timeline(size_t capacity = 65536) : capacity_(capacity) {}

  void Add(v1::Span span);

  // Removes and returns the spans recorded so far and the device spans the device has
  // finished, oldest first; adds to `*dropped` how many were lost to the bound since the
  // last call.
  std::vector<v1::Span> Drain(int64_t* dropped);

  // From now on spans also yield device spans timed by `clock`.
  void AttachStreamClock(StreamClock* clock);
  // Stops: keeps the device spans the device has finished, drops (and counts) the rest.
  // Call before the clock's device goes away, once no thread records spans.
  void DetachStreamClock();
  // Read without a lock: attaching and detaching happen while no thread records spans.
  StreamClock* stream_clock() const { return clock_.load(std::memory_order_acquire); }

  // A span of the device's: `span` (its lane the stream's), timed by the two marks (a
  // null mark, which a failing device gives, drops it, counted).
  void AddDeviceSpan(v1::Span span, std::unique_ptr<StreamClock::Mark> begin,
                     std::unique_ptr<StreamClock::Mark> end);

 private:
  struct PendingDeviceSpan {
    v1::Span span;
    std::unique_ptr<StreamClock::Mark> begin, end;
  };

  void AddLocked(v1::Span span) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the oldest of `queue` beyond the capacity, counting them.
  template <typename T>
  void TrimLocked(std::deque<T>& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (queue.size() > capacity_) {
      queue.pop_front();
      ++dropped_;
    }
  }
  // Moves the device spans the device has finished into spans_.
  void ResolveDeviceSpans() ABSL_EXCLUSIVE_LOCKS_REQUIRED(clock_mu_);

  const size_t capacity_;
  // Held while marks are queried (by the publisher), so the clock cannot be detached
  // meanwhile; taken before mu_. The threads that record spans never take it.
  absl::Mutex clock_mu_;
  std::atomic<StreamClock*> clock_{nullptr};
  mutable absl::Mutex mu_;
  std::deque<v1::Span> spans_ ABSL_GUARDED_BY(mu_);
  std::deque<PendingDeviceSpan> pending_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// A stream clock attached to a timeline for the attachment's lifetime, which must end
// before the clock's device does.
class StreamClockAttachment {
 public:
  StreamClockAttachment(Timeline* timeline, StreamClock* clock) : timeline_(timeline) {
    timeline_->AttachStreamClock(clock);
  }
  ~StreamClockAttachment() { timeline_->DetachStreamClock(); }
  StreamClockAttachment(const StreamClockAttachment&) = delete;
  StreamClockAttachment& operator=(const StreamClockAttachment&) = delete;

 private:
  Timeline* const timeline_;
};

// The lane (Chrome trace thread) spans of the calling thread go to: 0 for the training
// thread, 1 for the communication thread. Spans nest within a lane.
inline thread_local int timeline_lane = 0;

// Records one span into a timeline (may be null: then nothing) from construction to
// destruction, and the device's span of what the thread enqueued meanwhile when the
// timeline has a stream clock.
class ScopedSpan {
 public:
  ScopedSpan(Timeline* timeline, const char* name, int unit = -1, int64_t step = -1);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  Timeline* const timeline_;
  const char* const name_;
  const int unit_;
  const int64_t step_;
  const absl::Time start_;
  StreamClock* clock_ = nullptr;
  std::unique_ptr<StreamClock::Mark> device_begin_;
  int device_lane_ = 0;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_TIMELINE_H_
