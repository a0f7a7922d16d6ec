#include "server/scheduler.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::vector<IdleWorker> Workers(int n, v1::DeviceKind device = v1::CPU) {
  std::vector<IdleWorker> workers;
  workers.reserve(n);
  for (int i = 0; i < n; ++i) workers.push_back({"w" + std::to_string(i), device});
  return workers;
}

TEST(PlanGangPlacements, StartsAJobOnlyWithAllItsWorkers) {
  EXPECT_TRUE(PlanGangPlacements({{"a", 4, v1::CPU}}, Workers(3)).empty());
  auto placements = PlanGangPlacements({{"a", 3, v1::CPU}}, Workers(3));
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].worker_ids, (std::vector<std::string>{"w0", "w1", "w2"}));
}

TEST(PlanGangPlacements, PlacesSeveralJobsOnDisjointWorkers) {
  auto placements = PlanGangPlacements({{"a", 2, v1::CPU}, {"b", 2, v1::CPU}}, Workers(5));
  ASSERT_EQ(placements.size(), 2u);
  EXPECT_EQ(placements[0].worker_ids, (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(placements[1].worker_ids, (std::vector<std::string>{"w2", "w3"}));
}

TEST(PlanGangPlacements, NoBackfillPastAWaitingJobOfTheSameDevice) {
  // "a" waits for 4; "b" would fit, but must not overtake "a".
  auto placements = PlanGangPlacements({{"a", 4, v1::CPU}, {"b", 1, v1::CPU}}, Workers(2));
  EXPECT_TRUE(placements.empty());
}

// A job the registered workers can never start (only w0 advertises the memory it needs,
// it needs two) does not hold back the queue behind it: no worker freed would start it.
// A job that waits only for busy workers does.
TEST(PlanGangPlacements, AJobNoRegisteredWorkersCouldStartHoldsNothingBack) {
  std::vector<IdleWorker> idle = Workers(2);
  idle[0].memory_bytes = int64_t{64} << 30;
  idle[1].memory_bytes = int64_t{8} << 30;
  PendingJob big{"big", 2, v1::CPU};
  big.memory_per_rank = int64_t{32} << 30;
  const PendingJob small{"small", 1, v1::CPU};
  const std::vector<IdleWorker> registered = idle;
  auto placements = PlanGangPlacements({big, small}, idle, &registered);
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].job_id, "small");
  // A third worker with the memory, registered but busy: "big" could start once it is
  // free, so it waits at the head of the queue.
  std::vector<IdleWorker> more = registered;
  more.push_back({"w2", v1::CPU, int64_t{64} << 30});
  EXPECT_TRUE(PlanGangPlacements({big, small}, idle, &more).empty());
}

TEST(PlanGangPlacements, DeviceKindsAreSeparateQueues) {
  std::vector<IdleWorker> idle = Workers(1, v1::CPU);
  idle.push_back({"g0", v1::CUDA});
  auto placements = PlanGangPlacements({{"gpu-big", 2, v1::CUDA}, {"cpu", 1, v1::CPU}}, idle);
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].job_id, "cpu");
  EXPECT_EQ(placements[0].worker_ids, (std::vector<std::string>{"w0"}));
  auto gpu = PlanGangPlacements({{"gpu", 1, v1::CUDA}}, idle);
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].worker_ids, (std::vector<std::string>{"g0"}));
}

TEST(PlanGangPlacements, RanksGoOnlyToWorkersWithEnoughMemory) {
  const int64_t gib = int64_t{1} << 30;
  std::vector<IdleWorker> idle = {{"small", v1::CUDA, 40 * gib},
                                  {"big0", v1::CUDA, 80 * gib},
                                  {"unknown", v1::CUDA, 0},
                                  {"big1", v1::CUDA, 80 * gib}};
  auto placements = PlanGangPlacements({{"large", 2, v1::CUDA, 60 * gib}}, idle);
  ASSERT_EQ(placements.size(), 1u);
  // A worker that advertises nothing is not refused: the worker checks again itself.
  EXPECT_EQ(placements[0].worker_ids, (std::vector<std::string>{"big0", "unknown"}));
  // The small worker is left for a small job behind it.
  placements =
      PlanGangPlacements({{"large", 3, v1::CUDA, 60 * gib}, {"small", 1, v1::CUDA, gib}}, idle);
  ASSERT_EQ(placements.size(), 2u);
  EXPECT_EQ(placements[0].job_id, "large");
  EXPECT_EQ(placements[0].worker_ids, (std::vector<std::string>{"big0", "unknown", "big1"}));
  EXPECT_EQ(placements[1].job_id, "small");
  EXPECT_EQ(placements[1].worker_ids, (std::vector<std::string>{"small"}));
  placements = PlanGangPlacements({{"huge", 1, v1::CUDA, 100 * gib}}, idle);
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].worker_ids, (std::vector<std::string>{"unknown"}));
  EXPECT_TRUE(PlanGangPlacements({{"huge", 2, v1::CUDA, 100 * gib}}, idle).empty());
}

JobPaths Paths(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  JobPaths paths;
  for (const std::string& path : inputs)
    paths.inputs.push_back({"job.data.tokens.train_path", path});
  for (const std::string& path : outputs)
    paths.outputs.push_back({"job.output.checkpoint_dir", path});
  return paths;
}

v1::WorkerFolders Folders(const std::string& input, const std::string& output) {
  v1::WorkerFolders folders;
  folders.add_input_roots(input);
  folders.add_output_roots(output);
  return folders;
}

// A worker's own folders (its flags) keep jobs outside them off it: such a job goes to
// workers that allow it, rather than fail on a worker that would refuse its paths.
TEST(PlanGangPlacements, RanksGoOnlyToWorkersWhoseFoldersHoldTheJobsPaths) {
  std::vector<IdleWorker> idle = Workers(3);
  idle[0].folders = Folders("/data/team-a", "/data/team-a/out");
  idle[2].folders = Folders("/data", "/data");
  PendingJob job{"b", 2, v1::CPU, 0, Paths({"/data/team-b/train.bin"}, {"/data/team-b/ckpt"})};
  auto placements = PlanGangPlacements({job}, idle);
  ASSERT_EQ(placements.size(), 1u);
  // w1 advertises no folders: it bounds nothing.
  EXPECT_EQ(placements[0].worker_ids, (std::vector<std::string>{"w1", "w2"}));
  job.world_size = 3;
  EXPECT_TRUE(PlanGangPlacements({job}, idle).empty());
  // Its outputs count as well as its inputs.
  PendingJob writes_out{"c", 1, v1::CPU, 0, Paths({"/data/team-a/train.bin"}, {"/elsewhere/m"})};
  placements = PlanGangPlacements({writes_out}, idle);
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].worker_ids, std::vector<std::string>{"w1"});
}

TEST(PendingReason, SaysWhenTooFewWorkersHaveFoldersHoldingTheJobsPaths) {
  std::vector<IdleWorker> registered = Workers(3);
  for (IdleWorker& worker : registered) worker.folders = Folders("/data/team-a", "/data/team-a");
  registered[2].folders = std::nullopt;
  const PendingJob job{"b", 2, v1::CPU, 0, Paths({"/data/team-b/train.bin"}, {})};
  const WorkerSupply supply = SupplyFor(job, registered);
  EXPECT_EQ(supply.registered, 3);
  EXPECT_EQ(supply.with_enough_memory, 3);
  EXPECT_EQ(supply.able, 1);
  EXPECT_EQ(PendingReason(2, v1::CPU, supply),
            "waiting for 2 CPU workers whose folders (--allowed_input_paths, "
            "--allowed_output_paths) hold the job's paths, but only 1 of the 3 registered do");
  // Too little memory is said first: the folders are counted among the workers with it.
  PendingJob big = job;
  big.memory_per_rank = int64_t{1} << 40;
  registered[0].memory_bytes = registered[1].memory_bytes = registered[2].memory_bytes = int64_t{1}
                                                                                         << 30;
  EXPECT_NE(PendingReason(2, v1::CPU, SupplyFor(big, registered)).find("advertise that much"),
            std::string::npos);
  EXPECT_EQ(SupplyFor(big, registered).able, 0);
}

// A job every registered worker of its kind is short of memory for is refused at
// submission, naming the largest; one that fits, or none registered, is taken.
TEST(CheckSomeWorkerHasMemory, RefusesAJobEveryRegisteredWorkerIsTooSmallFor) {
  std::vector<IdleWorker> registered = Workers(3);
  registered[0].memory_bytes = int64_t{1} << 30;
  registered[1].memory_bytes = int64_t{4} << 30;
  registered[2].memory_bytes = int64_t{64} << 30;
  registered[2].device = v1::CUDA;  // another kind: not weighed for a CPU job
  PendingJob job{"j", 1, v1::CPU, int64_t{8} << 30, {}};
  const absl::Status refused = CheckSomeWorkerHasMemory(job, registered, "8.0 GiB");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("needs about 8.0 GiB per rank, but the largest CPU worker (" +
                                   registered[1].worker_id + ") advertises 4.0 GiB"),
            std::string::npos)
      << refused;
  job.memory_per_rank = int64_t{4} << 30;
  EXPECT_TRUE(CheckSomeWorkerHasMemory(job, registered, "4.0 GiB").ok());
  job.memory_per_rank = int64_t{8} << 30;
  registered[0].memory_bytes = 0;  // advertises nothing: it may fit, the worker checks
  EXPECT_TRUE(CheckSomeWorkerHasMemory(job, registered, "8.0 GiB").ok());
  EXPECT_TRUE(CheckSomeWorkerHasMemory(job, {}, "8.0 GiB").ok());  // none registered yet
}

// A job no registered worker would take is refused at submission, naming a path and a
// worker's folders; with none registered yet, or one that bounds nothing, it is taken.
TEST(CheckSomeWorkerWouldTake, RefusesAJobEveryRegisteredWorkersFoldersRefuse) {
  std::vector<IdleWorker> registered = Workers(2);
  registered[0].folders = Folders("/data/team-a", "/data/team-a");
  registered[1].folders = Folders("/data", "/data/team-b");
  const PendingJob job{"j", 1, v1::CPU, 0, Paths({"/data/team-a/train.bin"}, {"/data/team-a/m"})};
  EXPECT_TRUE(CheckSomeWorkerWouldTake(job, registered).ok());
  PendingJob elsewhere = job;
  elsewhere.paths = Paths({"/data/team-a/train.bin"}, {"/scratch/m"});
  const absl::Status refused = CheckSomeWorkerWouldTake(elsewhere, registered);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "no registered CPU worker would take this job: on w0, job.output.checkpoint_dir "
            "'/scratch/m' lies outside the worker's folders (read /data/team-a; write "
            "/data/team-a), and none of the other 1 would either (for its folders, its release "
            "or its memory) (`shardwise get workers` shows each worker's folders, its "
            "--allowed_input_paths and --allowed_output_paths, and features)");
  EXPECT_TRUE(CheckSomeWorkerWouldTake(elsewhere, {}).ok());  // none registered yet
  registered[1].folders = std::nullopt;
  EXPECT_TRUE(CheckSomeWorkerWouldTake(elsewhere, registered).ok());
  registered[1].device = v1::CUDA;  // another kind's worker does not count
  EXPECT_FALSE(CheckSomeWorkerWouldTake(elsewhere, registered).ok());
  // The worker that takes its paths lacks the memory, the one with the memory refuses
  // the paths: no worker would take it.
  registered[1].device = v1::CPU;
  registered[1].memory_bytes = int64_t{1} << 30;
  elsewhere.memory_per_rank = int64_t{2} << 30;
  EXPECT_FALSE(CheckSomeWorkerWouldTake(elsewhere, registered).ok());
  registered[0].folders = std::nullopt;  // short of nothing
  EXPECT_TRUE(CheckSomeWorkerWouldTake(elsewhere, registered).ok());
}

// A job whose submitter has folders of its own goes only to workers whose release
// enforces them: an older worker would check the coordinator's roots alone.
TEST(CanTakeRank, ASubmittersFoldersNeedAWorkerThatEnforcesThem) {
  std::vector<IdleWorker> workers = Workers(2);
  workers[1].features = {kFeatureSubmitterFolders};
  PendingJob job{"j", 1, v1::CPU, 0, Paths({"/data/alice/train.bin"}, {}), "alice"};
  EXPECT_FALSE(CanTakeRank(job, workers[0]));
  EXPECT_TRUE(CanTakeRank(job, workers[1]));
  auto placements = PlanGangPlacements({job}, workers);
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].worker_ids, std::vector<std::string>{"w1"});
  EXPECT_EQ(PendingReason(2, v1::CPU, SupplyFor(job, workers)),
            "waiting for 2 CPU workers whose folders (--allowed_input_paths, "
            "--allowed_output_paths) hold the job's paths and whose release enforces its "
            "submitter's folders, but only 1 of the 2 registered do");
  const absl::Status refused = CheckSomeWorkerWouldTake(job, {workers[0]});
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("on w0, the worker does not enforce the folders of alice's "
                                   "tokens-file entry (a release older than the coordinator's: "
                                   "upgrade it)"),
            std::string::npos)
      << refused;
  job.submitter_with_folders.clear();  // a submitter without folders: any release takes it
  EXPECT_TRUE(CanTakeRank(job, workers[0]));
}

std::vector<IdleWorker> WorkersOfVersions(const std::vector<int32_t>& versions) {
  std::vector<IdleWorker> workers = Workers(static_cast<int>(versions.size()));
  for (size_t i = 0; i < versions.size(); ++i) workers[i].data_plane_version = versions[i];
  return workers;
}

// Releases that disagree on a collective never meet in one attempt: a gang takes workers
// of one data-plane version, the newest of which enough are idle, in the workers' order.
TEST(PlanGangPlacements, AGangTakesWorkersOfOneDataPlaneVersion) {
  const std::vector<IdleWorker> idle = WorkersOfVersions({1, 2, 1, 2, 2});
  auto two = PlanGangPlacements({{"a", 2, v1::CPU}}, idle);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].worker_ids, (std::vector<std::string>{"w1", "w3"}));
  // Four: no version has enough, though five workers are idle.
  EXPECT_TRUE(PlanGangPlacements({{"b", 4, v1::CPU}}, idle).empty());
  // Two jobs of two: the second takes the older version once the newer has too few.
  auto both = PlanGangPlacements({{"a", 2, v1::CPU}, {"c", 2, v1::CPU}}, idle);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[1].worker_ids, (std::vector<std::string>{"w0", "w2"}));
}

// A job of four, which no version's registered workers could start, holds nothing back,
// and says why it waits.
TEST(PlanGangPlacements, AJobNoVersionCouldStartHoldsNothingBack) {
  const std::vector<IdleWorker> registered = WorkersOfVersions({1, 2, 1, 2, 3});
  const PendingJob four{"four", 4, v1::CPU};
  auto placements = PlanGangPlacements({four, {"one", 1, v1::CPU}}, registered, &registered);
  ASSERT_EQ(placements.size(), 1u);
  EXPECT_EQ(placements[0].job_id, "one");
  EXPECT_EQ(placements[0].worker_ids, std::vector<std::string>{"w4"});
  const WorkerSupply supply = SupplyFor(four, registered);
  EXPECT_EQ(supply.AbleOfOneVersion(), 2);
  EXPECT_EQ(PendingReason(4, v1::CPU, supply),
            "waiting for 4 CPU workers of one data-plane version (releases that differ there "
            "never share an attempt), but the 5 that would take it are of versions "
            "1 (2 workers), 2 (2 workers), 3 (1 worker)");
  EXPECT_EQ(PendingReason(2, v1::CPU, supply), "waiting for 2 idle CPU workers");
}

// Ranks added to a running attempt (a heal, a scale-up) go only to workers of its version.
TEST(CanTakeRank, ARunningAttemptsRanksNeedItsDataPlaneVersion) {
  const std::vector<IdleWorker> workers = WorkersOfVersions({1, 2});
  PendingJob job{"j", 2, v1::CPU};
  EXPECT_TRUE(CanTakeRank(job, workers[0]));  // a new gang: any version
  EXPECT_TRUE(CanTakeRank(job, workers[1]));
  job.data_plane_version = 1;
  EXPECT_TRUE(CanTakeRank(job, workers[0]));
  EXPECT_FALSE(CanTakeRank(job, workers[1]));
}

TEST(PendingReason, SaysWhenTheClusterHasTooFewWorkersOfTheKind) {
  EXPECT_EQ(PendingReason(4, v1::CPU), "waiting for 4 idle CPU workers");
  EXPECT_EQ(PendingReason(4, v1::CPU, {6}), "waiting for 4 idle CPU workers");
  EXPECT_EQ(PendingReason(4, v1::CUDA, {1}),
            "waiting for 4 CUDA workers (one per GPU), but only 1 is registered");
  EXPECT_EQ(PendingReason(2, v1::CUDA, {0}),
            "waiting for 2 CUDA workers (one per GPU), but only 0 are registered");
}

TEST(PendingReason, SaysWhenTooFewWorkersHaveTheMemory) {
  EXPECT_EQ(PendingReason(4, v1::CUDA, {6, 2, int64_t{60} << 30}),
            "waiting for 4 CUDA workers with at least 60.0 GiB each (the estimated memory "
            "per rank), but only 2 of the 6 registered advertise that much");
  EXPECT_EQ(PendingReason(4, v1::CUDA, {6, 5, int64_t{60} << 30}),
            "waiting for 4 idle CUDA workers");
}

}  // namespace
}  // namespace shardwise
