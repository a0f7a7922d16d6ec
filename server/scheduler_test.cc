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
