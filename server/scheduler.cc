#include "server/scheduler.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace shardwise {

std::vector<Placement> PlanGangPlacements(const std::vector<PendingJob>& pending,
                                          const std::vector<IdleWorker>& idle) {
  std::map<v1::DeviceKind, std::vector<std::string>> free_by_device;
  for (const IdleWorker& worker : idle) free_by_device[worker.device].push_back(worker.worker_id);
  std::map<v1::DeviceKind, size_t> next_free;
  std::set<v1::DeviceKind> blocked;  // a job of this kind is waiting: later ones wait too

  std::vector<Placement> placements;
  for (const PendingJob& job : pending) {
    if (blocked.count(job.device) > 0) continue;
    const std::vector<std::string>& free = free_by_device[job.device];
    size_t& next = next_free[job.device];
    if (job.world_size <= 0 || free.size() - next < static_cast<size_t>(job.world_size)) {
      blocked.insert(job.device);
      continue;
    }
    Placement placement;
    placement.job_id = job.job_id;
    placement.worker_ids.assign(free.begin() + next, free.begin() + next + job.world_size);
    next += job.world_size;
    placements.push_back(std::move(placement));
  }
  return placements;
}

std::string PendingReason(int32_t world_size, v1::DeviceKind device, int registered) {
  const std::string kind = v1::DeviceKind_Name(device);
  if (registered >= 0 && registered < world_size) {
    return absl::StrCat("waiting for ", world_size, " ", kind, " workers",
                        device == v1::CUDA ? " (one per GPU)" : "", ", but only ", registered,
                        registered == 1 ? " is" : " are", " registered");
  }
  return absl::StrCat("waiting for ", world_size, " idle ", kind, " workers");
}

}  // namespace shardwise
