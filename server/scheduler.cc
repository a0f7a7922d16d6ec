#include "server/scheduler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "contracts/memory_estimate.h"

namespace shardwise {

PendingJob PendingJobOf(const std::string& job_id, const v1::JobSpec& spec, int64_t memory_per_rank,
                        const std::string& submitter_with_folders) {
  return {job_id,          spec.world_size(), spec.device(),
          memory_per_rank, PathsOf(spec),     submitter_with_folders};
}

PendingJob PendingJobOf(const v1::Job& job) {
  return PendingJobOf(job.id(), job.spec(), job.memory_per_rank().total_bytes(),
                      job.submitter_roots().principal());
}

int64_t RankMemory(const v1::WorkerInfo& worker) {
  return worker.device() == v1::CUDA ? worker.gpu().memory_bytes() : worker.memory_bytes();
}

IdleWorker WorkerOffer(const v1::WorkerInfo& worker) {
  IdleWorker offer{worker.id(),
                   worker.device(),
                   RankMemory(worker),
                   std::nullopt,
                   {worker.features().begin(), worker.features().end()},
                   worker.data_plane_version()};
  if (worker.has_folders()) offer.folders = worker.folders();
  return offer;
}

bool MemoryFits(int64_t memory_per_rank, int64_t worker_memory) {
  return memory_per_rank <= 0 || worker_memory <= 0 || worker_memory >= memory_per_rank;
}

namespace {

// Whether `job` needs a feature `worker`'s release lacks.
bool LacksFeature(const PendingJob& job, const IdleWorker& worker) {
  return !job.submitter_with_folders.empty() &&
         std::find(worker.features.begin(), worker.features.end(), kFeatureSubmitterFolders) ==
             worker.features.end();
}

// The first path of `job` outside `worker`'s folders; null when it has none or they hold
// every path.
const JobPaths::Path* OutsideFolders(const PendingJob& job, const IdleWorker& worker) {
  return worker.folders.has_value() ? FirstOutside(*worker.folders, job.paths) : nullptr;
}

}  // namespace

std::string Refusal(const PendingJob& job, const IdleWorker& worker) {
  if (LacksFeature(job, worker)) {
    return absl::StrCat(
        "the worker does not enforce the folders of ", job.submitter_with_folders,
        "'s tokens-file entry (a release older than the coordinator's: upgrade it)");
  }
  const JobPaths::Path* outside = OutsideFolders(job, worker);
  if (outside == nullptr) return "";
  return absl::StrCat(outside->field, " '", outside->path,
                      "' lies outside the worker's folders (read ",
                      absl::StrJoin(worker.folders->input_roots(), ", "), "; write ",
                      absl::StrJoin(worker.folders->output_roots(), ", "), ")");
}

// Refusal's conditions without its words: the schedule pass asks this of every pending
// job and worker.
bool CanTakeRank(const PendingJob& job, const IdleWorker& worker) {
  return worker.device == job.device && MemoryFits(job.memory_per_rank, worker.memory_bytes) &&
         !LacksFeature(job, worker) && OutsideFolders(job, worker) == nullptr &&
         job.data_plane_version.value_or(worker.data_plane_version) == worker.data_plane_version;
}

absl::Status CheckSomeWorkerHasMemory(const PendingJob& job,
                                      const std::vector<IdleWorker>& registered,
                                      const std::string& estimate) {
  const IdleWorker* largest = nullptr;
  for (const IdleWorker& worker : registered) {
    if (worker.device != job.device) continue;
    if (MemoryFits(job.memory_per_rank, worker.memory_bytes)) return absl::OkStatus();
    if (largest == nullptr || worker.memory_bytes > largest->memory_bytes) largest = &worker;
  }
  if (largest == nullptr) return absl::OkStatus();  // none registered yet: the job waits
  return absl::FailedPreconditionError(
      absl::StrCat("the job needs about ", estimate, " per rank, but the largest ",
                   v1::DeviceKind_Name(job.device), " worker (", largest->worker_id,
                   ") advertises ", FormatBytes(largest->memory_bytes),
                   "; use more ranks with a sharded strategy, a smaller global_batch_size or more "
                   "gradient_accumulation_steps, or activation_checkpointing"));
}

absl::Status CheckSomeWorkerWouldTake(const PendingJob& job,
                                      const std::vector<IdleWorker>& registered) {
  const IdleWorker* refusing = nullptr;
  std::string refusal;
  int of_kind = 0;
  for (const IdleWorker& worker : registered) {
    if (worker.device != job.device) continue;
    ++of_kind;
    if (CanTakeRank(job, worker)) return absl::OkStatus();
    if (refusing != nullptr) continue;
    std::string why = Refusal(job, worker);
    if (why.empty()) continue;  // short of memory only: CheckSomeWorkerHasMemory says it
    refusing = &worker;
    refusal = std::move(why);
  }
  // None registered yet (the job waits), or every one short of memory only.
  if (refusing == nullptr) return absl::OkStatus();
  const int others = of_kind - 1;
  return absl::FailedPreconditionError(absl::StrCat(
      "no registered ", v1::DeviceKind_Name(job.device), " worker would take this job: on ",
      refusing->worker_id, ", ", refusal,
      others > 0 ? absl::StrCat(", and none of the other ", others,
                                " would either (for its folders, its release or its memory)")
                 : "",
      " (`shardwise get workers` shows each worker's folders, its --allowed_input_paths and "
      "--allowed_output_paths, and features)"));
}

WorkerSupply SupplyFor(const PendingJob& job, const std::vector<IdleWorker>& registered) {
  WorkerSupply supply{0, 0, job.memory_per_rank, 0, !job.submitter_with_folders.empty()};
  for (const IdleWorker& worker : registered) {
    if (worker.device != job.device) continue;
    ++supply.registered;
    if (!MemoryFits(job.memory_per_rank, worker.memory_bytes)) continue;
    ++supply.with_enough_memory;
    if (!CanTakeRank(job, worker)) continue;
    ++supply.able;
    ++supply.able_by_version[worker.data_plane_version];
  }
  return supply;
}

int WorkerSupply::AbleOfOneVersion() const {
  int most = 0;
  for (const auto& [version, count] : able_by_version) most = std::max(most, count);
  return most;
}

namespace {

// The first `job.world_size` workers of `idle` not `taken` that can take its ranks, in
// `idle`'s order, all of one data-plane version: the newest of which enough are free.
// Empty when no version has enough.
std::vector<size_t> ChooseGang(const PendingJob& job, const std::vector<IdleWorker>& idle,
                               const std::vector<bool>& taken) {
  std::map<int32_t, std::vector<size_t>, std::greater<int32_t>> by_version;
  for (size_t i = 0; i < idle.size(); ++i) {
    if (!taken[i] && CanTakeRank(job, idle[i])) by_version[idle[i].data_plane_version].push_back(i);
  }
  for (auto& [version, able] : by_version) {
    if (job.world_size > 0 && static_cast<int32_t>(able.size()) >= job.world_size) {
      able.resize(job.world_size);
      return std::move(able);
    }
  }
  return {};
}

}  // namespace

std::vector<Placement> PlanGangPlacements(const std::vector<PendingJob>& pending,
                                          const std::vector<IdleWorker>& idle,
                                          const std::vector<IdleWorker>* registered) {
  std::vector<bool> taken(idle.size(), false);
  std::set<v1::DeviceKind> blocked;  // a job of this kind is waiting: later ones wait too

  std::vector<Placement> placements;
  for (const PendingJob& job : pending) {
    if (blocked.count(job.device) > 0) continue;
    const std::vector<size_t> chosen = ChooseGang(job, idle, taken);
    if (chosen.empty()) {
      const bool could_start =
          registered == nullptr || SupplyFor(job, *registered).AbleOfOneVersion() >= job.world_size;
      if (could_start) blocked.insert(job.device);
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
  if (supply.able >= 0 && supply.able < world_size) {
    return absl::StrCat(
        "waiting for ", world_size, " ", kind,
        " workers whose folders (--allowed_input_paths, --allowed_output_paths) "
        "hold the job's paths",
        supply.submitter_folders ? " and whose release enforces its submitter's folders" : "",
        ", but only ", supply.able, " of the ", supply.registered, " registered do");
  }
  if (!supply.able_by_version.empty() && supply.AbleOfOneVersion() < world_size) {
    std::vector<std::string> versions;
    for (const auto& [version, count] : supply.able_by_version) {
      versions.push_back(absl::StrCat(version, " (", count, count == 1 ? " worker)" : " workers)"));
    }
    return absl::StrCat("waiting for ", world_size, " ", kind,
                        " workers of one data-plane version (releases that differ there never "
                        "share an attempt), but the ",
                        supply.able, " that would take it are of versions ",
                        absl::StrJoin(versions, ", "));
  }
  return absl::StrCat("waiting for ", world_size, " idle ", kind, " workers");
}

}  // namespace shardwise
