#ifndef SHARDWISE_WORKER_TESTING_EMULATED_STREAM_H_
#define SHARDWISE_WORKER_TESTING_EMULATED_STREAM_H_

// A GPU stream emulated on the CPU, for the stream-ordering checker (async_cpu_device.h):
// a thread that runs the tasks enqueued on it one at a time, in the order they were
// enqueued, while the threads that enqueued them go on. Before a task it may pause for a
// random time (seeded), so that what two streams run is interleaved differently from run
// to run, and work that is not ordered by a declared dependency runs early or late.
//
// Thread-safety: Enqueue and Drain may be called from any thread, also from a task of
// another stream; a task must not Drain its own stream.

#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardwise::testing {

struct StreamTiming {
  uint64_t seed = 1;
  // Each task waits a uniform random time up to this before it runs, with probability
  // pause_probability; zero: no pauses (the order still differs from the host's).
  absl::Duration max_pause = absl::Microseconds(100);
  double pause_probability = 0.5;
  // Every task first waits this long (then the random pause): a stream that lags far
  // behind the others.
  absl::Duration min_pause = absl::ZeroDuration();
  // The stream-ordering checker's post-backward stream's min_pause (async_cpu_device.h):
  // reductions that fall far behind the compute stream, so that compute work not ordered
  // after them meets their buffers before they ran.
  absl::Duration reduction_lag = absl::ZeroDuration();
};

class EmulatedStream {
 public:
  EmulatedStream(std::string name, const StreamTiming& timing);
  // Runs what was enqueued, then ends the thread.
  ~EmulatedStream();
  EmulatedStream(const EmulatedStream&) = delete;
  EmulatedStream& operator=(const EmulatedStream&) = delete;

  void Enqueue(std::function<void()> task);
  // The caller waits until every task enqueued before the call has run.
  void Drain();
  // Whether every task enqueued so far has run (none is waiting or running).
  bool Idle();
  const std::string& name() const { return name_; }

 private:
  void Run();
  // The pause before the next task, drawn on the stream's thread.
  absl::Duration NextPause();

  const std::string name_;
  const StreamTiming timing_;
  std::mt19937_64 random_;  // the stream thread's only
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar work_;      // a task was enqueued, or stopping_ set
  absl::CondVar progress_;  // a task finished
  std::thread thread_;      // last: starts once the rest exists
};

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_EMULATED_STREAM_H_
