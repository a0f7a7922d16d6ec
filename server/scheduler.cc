#include "server/scheduler.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "contracts/memory_estimate.h"

namespace shardwise {

bool MemoryFits(int64_t memory_per_rank, int64_t worker_memory) {
  return memory_per_rank <= 0 || worker_memory <= 0 || worker_memory >= memory_per_rank;
}

std::vector<Placement> PlanGangPlacements(const std::vector<PendingJob>& pending,
                                          const std::vector<IdleWorker>& idle) {
  std::vector<bool> taken(idle.size(), false);
  std::set<v1::DeviceKind> blocked;  // a job of this kind is waiting: later ones wait too

  std::vector<Placement> placements;
  for (const PendingJob& job : pending) {
    if (blocked.count(job.device) > 0) continue;
    // The first free workers of the job's kind that can hold a rank, in `idle`'s order.
    std::vector<size_t> chosen;
    for (size_t i = 0; i < idle.size() && static_cast<int32_t>(chosen.size()) < job.world_size;
         ++i) {
      if (!taken[i] && idle[i].device == job.device &&
          MemoryFits(job.memory_per_rank, idle[i].memory_bytes)) {
        chosen.push_back(i);
      }
    }
    if (job.world_size <= 0 || static_cast<int32_t>(chosen.size()) < job.world_size) {
      blocked.insert(job.device);
      continue;
    }
    Placement placement;
    placement.job_id = job.job_id;
    for (size_t i : chosen) {
      taken[i] = true;
      placement.worker_ids.push_back(idle[i].worker_id);
    }
    placements.push_back(std::move(placement));
  }
  return placements;
}

std::string PendingReason(int32_t world_size, v1::DeviceKind device, const WorkerSupply& supply) {
  const std::string kind = v1::DeviceKind_Name(device);
  if (supply.registered >= 0 && supply.registered < world_size) {
    return absl::StrCat("waiting for ", world_size, " ", kind, " workers",
                        device == v1::CUDA ? " (one per GPU)" : "", ", but only ",
                        supply.registered, supply.registered == 1 ? " is" : " are", " registered");
  }
  if (supply.with_enough_memory >= 0 && supply.with_enough_memory < world_size) {
    return absl::StrCat("waiting for ", world_size, " ", kind, " workers with at least ",
                        FormatBytes(supply.memory_per_rank),
                        " each (the estimated memory per rank), but only ",
                        supply.with_enough_memory, " of the ", supply.registered,
                        " registered advertise that much");
  }
  return absl::StrCat("waiting for ", world_size, " idle ", kind, " workers");
}

}  // namespace shardwise
