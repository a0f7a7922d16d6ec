#include "worker/cuda/stream_clock.h"

#include <cmath>

#include "absl/time/clock.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {
namespace {

constexpr absl::Duration kReferenceLifetime = absl::Seconds(10);

// A failed call leaves its error as the thread's last CUDA error, which the next kernel
// launch would read as its own and fail the job with: a timeline's trouble is cleared
// here, and only costs its spans.
template <typename T>
T Failed(T value) {
  cudaGetLastError();
  return value;
}

}  // namespace

struct CudaStreamClock::EventMark final : StreamClock::Mark {
  std::shared_ptr<Event> event;  // mark_events_', back to the pool with the mark
  std::shared_ptr<const Reference> reference;
};

std::shared_ptr<const CudaStreamClock::Reference> CudaStreamClock::CurrentReference() {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    const bool fresh = reference_ != nullptr && now - reference_made_ < kReferenceLifetime;
    // While one thread renews the reference, the others date their marks by the old one;
    // only the first reference is waited for.
    if (fresh || (renewing_ && reference_ != nullptr)) return reference_;
    auto first_made = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !renewing_; };
    mu_.Await(absl::Condition(&first_made));
    if (reference_ != nullptr && now - reference_made_ < kReferenceLifetime) return reference_;
    renewing_ = true;
  }
  // Outside the lock: the wait for the reference event (microseconds on an idle stream)
  // holds no other thread's marks.
  std::shared_ptr<const Reference> made = MakeReference();
  absl::MutexLock lock(&mu_);
  renewing_ = false;
  if (made != nullptr) {
    reference_ = std::move(made);
    reference_made_ = now;
  }
  return reference_;
}

std::shared_ptr<const CudaStreamClock::Reference> CudaStreamClock::MakeReference() {
  if (reference_stream_.get() == nullptr) {
    auto stream = Stream::Create();
    if (!stream.ok()) return Failed(nullptr);
    reference_stream_ = std::move(*stream);
  }
  auto event = Event::Create(/*timing=*/true);
  if (!event.ok()) return Failed(nullptr);
  auto reference = std::make_shared<Reference>();
  reference->event = std::move(*event);
  // The stream is idle: the device passes the event as soon as it sees it, between the
  // two host times.
  const absl::Time before = absl::Now();
  if (!reference->event.Record(reference_stream_.get()).ok() ||
      !reference->event.Synchronize().ok()) {
    return Failed(nullptr);
  }
  const absl::Time after = absl::Now();
  reference->host_us = absl::ToUnixMicros(before + (after - before) / 2);
  return reference;
}

std::unique_ptr<StreamClock::Mark> CudaStreamClock::Record(int* lane) {
  const auto [stream, stream_lane] = current_stream_();
  *lane = stream_lane;
  std::shared_ptr<const Reference> reference = CurrentReference();
  if (reference == nullptr) return nullptr;
  absl::StatusOr<std::shared_ptr<Event>> event = mark_events_.Acquire();
  if (!event.ok() || !(*event)->Record(stream).ok()) return Failed(nullptr);
  auto mark = std::make_unique<EventMark>();
  mark->event = std::move(*event);
  mark->reference = std::move(reference);
  return mark;
}

std::optional<int64_t> CudaStreamClock::PassedAt(const Mark& mark) {
  const auto& event_mark = static_cast<const EventMark&>(mark);
  // The asking thread (the progress publisher) may be bound to no GPU or another one; it
  // gets its own back after the query.
  const ScopedCurrentGpu on_gpu(gpu_);
  const cudaError_t state = QueryEvent(event_mark.event->get());
  if (state == cudaErrorNotReady) return std::nullopt;
  if (state != cudaSuccess) return Failed(std::optional<int64_t>());  // never passes
  absl::StatusOr<float> ms = Event::ElapsedMs(event_mark.reference->event, *event_mark.event);
  if (!ms.ok()) return std::nullopt;
  return event_mark.reference->host_us + std::llround(static_cast<double>(*ms) * 1000.0);
}

}  // namespace shardwise::cuda
