#include "worker/cuda/stream.h"

#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {

absl::StatusOr<Event> Event::Create(bool timing) {
  cudaEvent_t event = nullptr;
  RETURN_IF_CUDA_ERROR(
      cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(event);
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = other.event_;
    other.event_ = nullptr;
  }
  return *this;
}

absl::Status Event::Record(cudaStream_t stream) {
  RETURN_IF_CUDA_ERROR(cudaEventRecord(event_, stream));
  return absl::OkStatus();
}

absl::StatusOr<bool> Event::Done() const {
  const cudaError_t state = QueryEvent(event_);
  if (state == cudaErrorNotReady) return false;
  RETURN_IF_CUDA_ERROR(state);
  return true;
}

absl::Status Event::Synchronize() {
  RETURN_IF_CUDA_ERROR(cudaEventSynchronize(event_));
  return absl::OkStatus();
}

absl::StatusOr<float> Event::ElapsedMs(const Event& start, const Event& end) {
  float ms = 0;
  RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

absl::StatusOr<Stream> Stream::Create(int priority) {
  cudaStream_t stream = nullptr;
  RETURN_IF_CUDA_ERROR(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority));
  return Stream(stream);
}

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = other.stream_;
    other.stream_ = nullptr;
  }
  return *this;
}

absl::Status Stream::WaitFor(const Event& event) {
  RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream_, event.get(), 0));
  return absl::OkStatus();
}

absl::Status Stream::Synchronize() {
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<FsdpStreams> FsdpStreams::Create() {
  int least = 0, greatest = 0;
  RETURN_IF_CUDA_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  FsdpStreams streams;
  ASSIGN_OR_RETURN(streams.compute, Stream::Create(least));
  ASSIGN_OR_RETURN(streams.unshard, Stream::Create(greatest));
  ASSIGN_OR_RETURN(streams.post_backward, Stream::Create(greatest));
  ASSIGN_OR_RETURN(streams.all_reduce, Stream::Create(least));
  return streams;
}

}  // namespace shardwise::cuda
