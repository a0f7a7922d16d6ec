#ifndef SHARDWISE_SERVER_SCHEDULER_H_
#define SHARDWISE_SERVER_SCHEDULER_H_

// Gang placement, as a pure function: which pending jobs start now, on which workers.
// A job starts only when world_size idle workers of its device kind exist that advertise
// at least the job's estimated memory per rank and whose own folders (where they have
// some) hold every path the job reads and writes, all of one data-plane version
// (contracts/data_plane_version.h: releases that disagree on a collective's size must not
// meet in one attempt); all its ranks start together. Jobs are
// served first-come first-served per device kind, without backfilling: a large job at the
// head of the queue is never starved by smaller ones behind it.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/path_policy.h"
#include "contracts/worker_features.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

struct PendingJob {
  std::string job_id;
  int32_t world_size = 0;
  v1::DeviceKind device = v1::CPU;
  int64_t memory_per_rank = 0;  // estimated bytes; 0: not known
  JobPaths paths;               // what its ranks read and write
  // The principal whose tokens-file entry names folders for it ("" when none): only a
  // worker that enforces them (kFeatureSubmitterFolders) may take it.
  std::string submitter_with_folders;
  // The data-plane version every worker of it must have: a running attempt's (its live
  // ranks' workers'), for the ranks it adds. Unset for a new gang, which takes workers
  // of any one version.
  std::optional<int32_t> data_plane_version;
};
// `job` as the scheduler weighs it.
PendingJob PendingJobOf(const v1::Job& job);
// A job not admitted yet (its `spec` with defaults applied, `memory_per_rank` estimated,
// `submitter_with_folders` as PendingJob says), as the scheduler would weigh it.
PendingJob PendingJobOf(const std::string& job_id, const v1::JobSpec& spec, int64_t memory_per_rank,
                        const std::string& submitter_with_folders);

// A worker as the scheduler weighs it (IdleWorker: one free to take a rank now).
struct IdleWorker {
  std::string worker_id;
  v1::DeviceKind device = v1::CPU;
  int64_t memory_bytes = 0;  // what it advertises for a rank; 0: not known
  // Its own folders, where it has some (v1::WorkerInfo.folders); unset: it bounds nothing.
  std::optional<v1::WorkerFolders> folders;
  std::vector<std::string> features;  // what its release enforces
  int32_t data_plane_version = 0;     // its release's (contracts/data_plane_version.h)
};
// The memory a worker offers one rank: its GPU's for a CUDA worker, the host's otherwise;
// 0 when it advertises none.
int64_t RankMemory(const v1::WorkerInfo& worker);
// `worker` as the scheduler weighs it.
IdleWorker WorkerOffer(const v1::WorkerInfo& worker);

// Whether a worker advertising `worker_memory` can take a rank needing `memory_per_rank`
// (either 0: not known, so yes).
bool MemoryFits(int64_t memory_per_rank, int64_t worker_memory);

// Why `worker` would refuse a rank of `job` for what it enforces, in words ("" when it
// would not): a path of the job outside the worker's own folders (FirstOutside), or a
// submitter's folders its release does not enforce. Device and memory aside.
std::string Refusal(const PendingJob& job, const IdleWorker& worker);

// Whether `worker` can take a rank of `job`: of its kind, with the memory (MemoryFits),
// nothing to refuse (Refusal), and of the job's data-plane version where it has one.
// Memory and folders are what the worker says; it checks both again.
bool CanTakeRank(const PendingJob& job, const IdleWorker& worker);

struct Placement {
  std::string job_id;
  std::vector<std::string> worker_ids;  // worker_ids[r] runs rank r
};

// FAILED_PRECONDITION when workers of the job's kind are registered (`registered`: those
// not lost) and none advertises the job's memory per rank (MemoryFits), naming the
// largest and what it advertises against `estimate` (the estimate per rank in words):
// no worker that exists could run the job. OK with none registered yet.
absl::Status CheckSomeWorkerHasMemory(const PendingJob& job,
                                      const std::vector<IdleWorker>& registered,
                                      const std::string& estimate);

// FAILED_PRECONDITION when workers of the job's kind are registered (`registered`: those
// not lost), none of them could take a rank (CanTakeRank: memory, folders, release), and
// one has something besides memory to refuse it for (Refusal), which it says: such a job
// would wait at the head of its queue, holding back every job behind it, until an
// operator changed a worker's flags or release. OK with none registered yet (the job
// waits for them); a job every worker is short of memory for is
// CheckSomeWorkerHasMemory's to refuse.
absl::Status CheckSomeWorkerWouldTake(const PendingJob& job,
                                      const std::vector<IdleWorker>& registered);

// The workers of a job's kind that exist, for saying why it waits; -1 when not known.
struct WorkerSupply {
  int registered = -1;          // workers of the job's device kind, not lost
  int with_enough_memory = -1;  // of those, the ones advertising the job's memory per rank
  int64_t memory_per_rank = 0;
  int able = -1;  // of those, the ones with nothing to refuse the job for (CanTakeRank)
  bool submitter_folders = false;  // the job needs workers enforcing its submitter's folders
  // The able ones by their data-plane version: a gang takes workers of one.
  std::map<int32_t, int> able_by_version;
  // The most able workers that share a data-plane version: how many ranks could start.
  int AbleOfOneVersion() const;
};
// The supply for `job` among `registered` (the workers not lost, idle or not).
WorkerSupply SupplyFor(const PendingJob& job, const std::vector<IdleWorker>& registered);

// Why a job of `world_size` ranks on `device` waits: "waiting for N idle CPU workers";
// when fewer than N workers of that kind are registered at all (a job asking for more
// GPUs than the cluster has), "waiting for N CUDA workers (one per GPU), but only M are
// registered"; when enough are registered but fewer than N advertise the job's memory,
// "waiting for N CPU workers with at least X each (the estimated memory per rank), but
// only M of the K registered advertise that much"; when fewer than N of those would take
// it (CanTakeRank), "waiting for N CPU workers whose folders (--allowed_input_paths,
// --allowed_output_paths) hold the job's paths[ and whose release enforces its
// submitter's folders], but only M of the K registered do"; when those are enough but
// fewer than N share a data-plane version (a rolling upgrade under way), "waiting for N
// CPU workers of one data-plane version (...), but the M that would take it are of
// versions 1 (2 workers), 2 (2 workers)".
std::string PendingReason(int32_t world_size, v1::DeviceKind device,
                          const WorkerSupply& supply = {});

// `pending` in submission order; `idle` in the order ranks should be handed out. A job's
// ranks go to the first idle workers that would take them, all of one data-plane version:
// the newest of which enough are idle (during a rolling upgrade, the upgraded workers
// once they suffice). A job
// that cannot start now holds back the later jobs of its device (no backfill: they would
// take the workers it waits for), unless the `registered` workers (SupplyFor's: not lost,
// idle or not) hold fewer than its world_size of one version that would take it: no worker freed
// would start it, so holding the queue for it would only starve the others until more workers
// register. Without `registered`, every waiting job holds its device back.
std::vector<Placement> PlanGangPlacements(const std::vector<PendingJob>& pending,
                                          const std::vector<IdleWorker>& idle,
                                          const std::vector<IdleWorker>* registered = nullptr);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SCHEDULER_H_
