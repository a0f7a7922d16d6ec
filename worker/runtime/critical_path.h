#ifndef SHARDWISE_WORKER_RUNTIME_CRITICAL_PATH_H_
#define SHARDWISE_WORKER_RUNTIME_CRITICAL_PATH_H_

// Calls to the coordinator made on a training thread, i.e. on the step's critical path.
// In steady state there should be none: progress, timelines and positions go out from
// other threads. The trainer marks its thread; every coordinator client counts its calls.

#include <atomic>
#include <cstdint>

namespace shardwise {

inline thread_local bool on_training_thread = false;
inline std::atomic<int64_t> training_thread_coordinator_calls{0};

// Call before every RPC or stream write to the coordinator.
inline void CountCoordinatorCall() {
  if (on_training_thread) training_thread_coordinator_calls.fetch_add(1);
}

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_CRITICAL_PATH_H_
