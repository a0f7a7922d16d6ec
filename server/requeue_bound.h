#ifndef SHARDWISE_SERVER_REQUEUE_BOUND_H_
#define SHARDWISE_SERVER_REQUEUE_BOUND_H_

// How often a job is placed again without a restart counted before the coordinator stops
// blaming the workers. A quarantine (a rank that never reached the rendezvous, a worker
// lost before its rank joined or unable to run it, a host lacking the job's inputs)
// blames workers and re-queues the job uncounted; a job whose own start takes its
// workers down (a rank that runs its host out of memory before it joins) would then move
// on to the next workers for ever, taking each out of scheduling. After this many
// uncounted re-queues in a row without an attempt that ran (Job.requeues_since_running),
// the workers are still quarantined but the re-queue counts a restart, so that the job's
// restart policy bounds it; an input missing on some hosts fails the job as any missing
// input does (missing_inputs.h).

#include <cstdint>

namespace shardwise {

inline constexpr int32_t kMaxRequeuesWithoutRestart = 3;

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_REQUEUE_BOUND_H_
