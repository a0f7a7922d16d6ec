#include "worker/testing/cpu_rank_model.h"

#include <thread>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/data/weights.h"

namespace shardwise::testing {

absl::StatusOr<std::unique_ptr<CpuRankModel>> CpuRankModel::Create(gloo::rendezvous::Store& store,
                                                                   const v1::JobSpec& spec,
                                                                   int rank) {
  ASSIGN_OR_RETURN(const fsdp::ShardingPlan plan,
                   fsdp::PlanSharding(spec.fsdp(), spec.world_size(), rank));
  std::unique_ptr<CpuRankModel> built(new CpuRankModel());
  ASSIGN_OR_RETURN(built->groups_, ConnectPlanGroups(store, plan, rank));
  ASSIGN_OR_RETURN(built->model_,
                   fsdp::FsdpModel::Create(
                       spec, plan, {built->groups_.shard.get(), built->groups_.replicate.get()},
                       &built->device_, SeededWeights(spec.model(), 0)));
  return built;
}

void OnEachRank(const v1::JobSpec& spec,
                const std::function<void(int rank, fsdp::FsdpModel& model)>& body) {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> ranks;
  ranks.reserve(spec.world_size());
  for (int r = 0; r < spec.world_size(); ++r) {
    ranks.emplace_back([&, r] {
      auto rank = CpuRankModel::Create(store, spec, r);
      ASSERT_TRUE(rank.ok()) << rank.status();
      body(r, (*rank)->model());
    });
  }
  for (std::thread& rank : ranks) rank.join();
}

MicroBatch SixRowsOfQuarters() {
  MicroBatch batch;
  batch.rows = 6;
  batch.inputs.assign(size_t{6} * 6, 0.25f);
  batch.labels.assign(6, 1);
  return batch;
}

}  // namespace shardwise::testing
