#ifndef SHARDWISE_SERVER_SCHEDULER_H_
#define SHARDWISE_SERVER_SCHEDULER_H_

// Gang placement, as a pure function: which pending jobs start now, on which workers.
// A job starts only when world_size idle workers of its device kind exist that advertise
// at least the job's estimated memory per rank; all its ranks start together. Jobs are served
// first-come first-served per device kind, without backfilling: a large job at the head of the
// queue is never starved by smaller ones behind it.

#include <string>
#include <vector>

#include "proto/job_spec.pb.h"

namespace shardwise {

struct PendingJob {
  std::string job_id;
  int32_t world_size = 0;
  v1::DeviceKind device = v1::CPU;
  int64_t memory_per_rank = 0;  // estimated bytes; 0: not known
};

struct IdleWorker {
  std::string worker_id;
  v1::DeviceKind device = v1::CPU;
  int64_t memory_bytes = 0;  // what it advertises for a rank; 0: not known
};

// Whether a worker advertising `worker_memory` can take a rank needing `memory_per_rank`
// (either 0: not known, so yes).
bool MemoryFits(int64_t memory_per_rank, int64_t worker_memory);

struct Placement {
  std::string job_id;
  std::vector<std::string> worker_ids;  // worker_ids[r] runs rank r
};

// The workers of a job's kind that exist, for saying why it waits; -1 when not known.
struct WorkerSupply {
  int registered = -1;          // workers of the job's device kind, not lost
  int with_enough_memory = -1;  // of those, the ones advertising the job's memory per rank
  int64_t memory_per_rank = 0;
};

// Why a job of `world_size` ranks on `device` waits: "waiting for N idle CPU workers";
// when fewer than N workers of that kind are registered at all (a job asking for more
// GPUs than the cluster has), "waiting for N CUDA workers (one per GPU), but only M are
// registered"; when enough are registered but fewer than N advertise the job's memory,
// "waiting for N CPU workers with at least X each (the estimated memory per rank), but
// only M of the K registered advertise that much".
std::string PendingReason(int32_t world_size, v1::DeviceKind device,
                          const WorkerSupply& supply = {});

// `pending` in submission order; `idle` in the order ranks should be handed out.
std::vector<Placement> PlanGangPlacements(const std::vector<PendingJob>& pending,
                                          const std::vector<IdleWorker>& idle);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SCHEDULER_H_
