#ifndef SHARDWISE_SERVER_SCHEDULER_H_
#define SHARDWISE_SERVER_SCHEDULER_H_

// Gang placement, as a pure function: which pending jobs start now, on which workers.
// A job starts only when world_size idle workers of its device kind exist; all its ranks
// start together. Jobs are served first-come first-served per device kind, without
// backfilling: a large job at the head of the queue is never starved by smaller ones
// behind it.

#include <string>
#include <vector>

#include "proto/job_spec.pb.h"

namespace shardwise {

struct PendingJob {
  std::string job_id;
  int32_t world_size = 0;
  v1::DeviceKind device = v1::CPU;
};

struct IdleWorker {
  std::string worker_id;
  v1::DeviceKind device = v1::CPU;
};

struct Placement {
  std::string job_id;
  std::vector<std::string> worker_ids;  // worker_ids[r] runs rank r
};

// Why a job of `world_size` ranks on `device` waits: "waiting for N idle CPU workers",
// or, when fewer than N workers of that kind are registered at all (a job asking for
// more GPUs than the cluster has), "waiting for N CUDA workers (one per GPU), but only M
// are registered". `registered` < 0 when not known.
std::string PendingReason(int32_t world_size, v1::DeviceKind device, int registered);

// `pending` in submission order; `idle` in the order ranks should be handed out.
std::vector<Placement> PlanGangPlacements(const std::vector<PendingJob>& pending,
                                          const std::vector<IdleWorker>& idle);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SCHEDULER_H_
