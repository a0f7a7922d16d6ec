#ifndef SHARDWISE_WORKER_RUNTIME_TIMELINE_H_
#define SHARDWISE_WORKER_RUNTIME_TIMELINE_H_

// A rank's timeline: spans (a step; forward and backward of each unit; each collective;
// the optimizer) with wall-clock start times, kept in a bounded buffer and drained in
// batches by the progress publisher, which sends them to the coordinator. When the
// buffer is full the oldest spans are dropped and counted, so memory stays bounded
// whatever the publisher does.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/job.pb.h"

namespace shardwise {

class Timeline {
 public:
  explicit Timeline(size_t capacity = 65536) : capacity_(capacity) {}

  void Add(v1::Span span) {
    absl::MutexLock lock(&mu_);
    if (spans_.size() == capacity_) {
      spans_.pop_front();
      ++dropped_;
    }
    spans_.push_back(std::move(span));
  }

  // Removes and returns the spans recorded so far, oldest first; adds to `*dropped` how
  // many were lost to the bound since the last call.
  std::vector<v1::Span> Drain(int64_t* dropped) {
    absl::MutexLock lock(&mu_);
    std::vector<v1::Span> out(std::make_move_iterator(spans_.begin()),
                              std::make_move_iterator(spans_.end()));
    spans_.clear();
    *dropped += dropped_;
    dropped_ = 0;
    return out;
  }

 private:
  const size_t capacity_;
  absl::Mutex mu_;
  std::deque<v1::Span> spans_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// The lane (Chrome trace thread) spans of the calling thread go to: 0 for the training
// thread, 1 for the communication thread. Spans nest within a lane.
inline thread_local int timeline_lane = 0;

// Records one span into a timeline (may be null: then nothing) from construction to
// destruction.
class ScopedSpan {
 public:
  ScopedSpan(Timeline* timeline, const char* name, int unit = -1, int64_t step = -1)
      : timeline_(timeline), name_(name), unit_(unit), step_(step),
        start_(timeline ? absl::Now() : absl::InfinitePast()) {}
  ~ScopedSpan() {
    if (timeline_ == nullptr) return;
    v1::Span span;
    span.set_name(name_);
    // Both ends rounded down on one clock: a span inside another stays inside.
    const int64_t start_us = absl::ToUnixMicros(start_);
    span.set_start_us(start_us);
    span.set_duration_us(absl::ToUnixMicros(absl::Now()) - start_us);
    span.set_unit(unit_);
    span.set_step(step_);
    span.set_lane(timeline_lane);
    timeline_->Add(std::move(span));
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  Timeline* const timeline_;
  const char* const name_;
  const int unit_;
  const int64_t step_;
  const absl::Time start_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_TIMELINE_H_
