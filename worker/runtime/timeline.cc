#include "worker/runtime/timeline.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "common/clock.h"

namespace shardwise {

void Timeline::Add(v1::Span span) {
  absl::MutexLock lock(&mu_);
  AddLocked(std::move(span));
}

void Timeline::AddLocked(v1::Span span) {
  spans_.push_back(std::move(span));
  TrimLocked(spans_);
}

std::vector<v1::Span> Timeline::Drain(int64_t* dropped) {
  {
    absl::MutexLock clock_lock(&clock_mu_);
    if (stream_clock() != nullptr) ResolveDeviceSpans();
  }
  absl::MutexLock lock(&mu_);
  std::vector<v1::Span> out(std::make_move_iterator(spans_.begin()),
                            std::make_move_iterator(spans_.end()));
  spans_.clear();
  *dropped += dropped_;
  dropped_ = 0;
  return out;
}

void Timeline::AttachStreamClock(StreamClock* clock) {
  absl::MutexLock lock(&clock_mu_);
  clock_.store(clock, std::memory_order_release);
}

void Timeline::DetachStreamClock() {
  absl::MutexLock clock_lock(&clock_mu_);
  if (stream_clock() == nullptr) return;
  ResolveDeviceSpans();
  clock_.store(nullptr, std::memory_order_release);
  absl::MutexLock lock(&mu_);
  dropped_ += static_cast<int64_t>(pending_.size());
  pending_.clear();
}

void Timeline::AddDeviceSpan(v1::Span span, std::unique_ptr<StreamClock::Mark> begin,
                             std::unique_ptr<StreamClock::Mark> end) {
  absl::MutexLock lock(&mu_);
  if (begin == nullptr || end == nullptr) {
    ++dropped_;
    return;
  }
  pending_.push_back({std::move(span), std::move(begin), std::move(end)});
  TrimLocked(pending_);
}

void Timeline::ResolveDeviceSpans() {
  // The marks are queried outside mu_: the threads that record spans never wait on the
  // device's driver for this.
  std::deque<PendingDeviceSpan> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.swap(pending_);
  }
  StreamClock* const clock = stream_clock();
  std::vector<v1::Span> resolved;
  std::deque<PendingDeviceSpan> waiting;
  for (PendingDeviceSpan& p : pending) {
    // The end is passed after the begin on the same stream: asked first.
    const std::optional<int64_t> end = clock->PassedAt(*p.end);
    const std::optional<int64_t> begin = end ? clock->PassedAt(*p.begin) : std::nullopt;
    if (!begin.has_value()) {
      waiting.push_back(std::move(p));
      continue;
    }
    p.span.set_start_us(*begin);
    p.span.set_duration_us(std::max<int64_t>(0, *end - *begin));
    resolved.push_back(std::move(p.span));
  }
  absl::MutexLock lock(&mu_);
  for (v1::Span& span : resolved) AddLocked(std::move(span));
  // Still waiting, ahead of those recorded meanwhile.
  for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) pending_.push_front(std::move(*it));
  TrimLocked(pending_);
}

ScopedSpan::ScopedSpan(Timeline* timeline, const char* name, int unit, int64_t step)
    : timeline_(timeline),
      name_(name),
      unit_(unit),
      step_(step),
      start_(timeline ? Clock::Real().Now() : absl::InfinitePast()) {
  if (timeline_ == nullptr) return;
  clock_ = timeline_->stream_clock();
  if (clock_ != nullptr) device_begin_ = clock_->Record(&device_lane_);
}

ScopedSpan::~ScopedSpan() {
  if (timeline_ == nullptr) return;
  v1::Span span;
  span.set_name(name_);
  // Both ends rounded down on one clock: a span inside another stays inside.
  const int64_t start_us = absl::ToUnixMicros(start_);
  span.set_start_us(start_us);
  span.set_duration_us(absl::ToUnixMicros(Clock::Real().Now()) - start_us);
  span.set_unit(unit_);
  span.set_step(step_);
  span.set_lane(timeline_lane);
  if (device_begin_ != nullptr) {
    v1::Span device = span;
    device.set_lane(device_lane_);
    int end_lane = 0;
    std::unique_ptr<StreamClock::Mark> device_end = clock_->Record(&end_lane);
    timeline_->AddDeviceSpan(std::move(device), std::move(device_begin_), std::move(device_end));
  }
  timeline_->Add(std::move(span));
}

}  // namespace shardwise
