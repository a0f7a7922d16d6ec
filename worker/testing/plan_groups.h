#ifndef SHARDWISE_WORKER_TESTING_PLAN_GROUPS_H_
#define SHARDWISE_WORKER_TESTING_PLAN_GROUPS_H_

// A rank's shard and replicate groups for tests that run each rank as a thread: real Gloo
// over loopback through an in-memory store, a group of one as a SoloCommunicator.

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "contracts/fsdp_layout.h"
#include "gloo/rendezvous/store.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/solo_communicator.h"

namespace shardwise::testing {

struct PlanGroups {
  std::unique_ptr<Communicator> shard, replicate;
};

// `rank`'s groups under `plan`, each named apart from the others of its kind (HYBRID has
// one shard group per replica, one replicate group per shard).
inline absl::StatusOr<PlanGroups> ConnectPlanGroups(gloo::rendezvous::Store& store,
                                                    const fsdp::ShardingPlan& plan, int rank) {
  const auto connect =
      [&](const std::vector<int>& ranks,
          const std::string& name) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    if (ranks.size() == 1) return std::unique_ptr<Communicator>(new SoloCommunicator());
    auto group = GlooCommunicator::ConnectGroup(store, name, ranks, rank, {});
    if (!group.ok()) return group.status();
    return std::unique_ptr<Communicator>(std::move(*group));
  };
  PlanGroups groups;
  auto shard = connect(plan.ShardGroupRanks(), absl::StrCat("shard-", plan.replicate_rank));
  if (!shard.ok()) return shard.status();
  auto replicate = connect(plan.ReplicateGroupRanks(), absl::StrCat("replicate-", plan.shard_rank));
  if (!replicate.ok()) return replicate.status();
  groups.shard = *std::move(shard);
  groups.replicate = *std::move(replicate);
  return groups;
}

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_PLAN_GROUPS_H_
