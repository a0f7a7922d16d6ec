#ifndef SHARDWISE_WORKER_TESTING_CPU_RANK_MODEL_H_
#define SHARDWISE_WORKER_TESTING_CPU_RANK_MODEL_H_

// One rank's FsdpModel on the CPU device, with its groups over Gloo (plan_groups.h) and
// its seeded initial weights: for tests that drive the model directly, each rank a thread
// sharing one in-memory store.

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "gloo/rendezvous/store.h"
#include "proto/job_spec.pb.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/data/batch.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/runtime/memory.h"
#include "worker/testing/plan_groups.h"

namespace shardwise::testing {

class CpuRankModel {
 public:
  // Rank `rank` of `spec` (its world_size ranks), weights seeded with 0.
  static absl::StatusOr<std::unique_ptr<CpuRankModel>> Create(gloo::rendezvous::Store& store,
                                                              const v1::JobSpec& spec, int rank);

  fsdp::FsdpModel& model() { return *model_; }

 private:
  CpuRankModel() = default;

  PlanGroups groups_;
  CpuCachingAllocator allocator_;
  CpuDevice device_{&allocator_};
  std::unique_ptr<fsdp::FsdpModel> model_;
};

// Runs `body` on each rank of `spec` (its world_size), each a thread with its model over
// one in-memory store, and waits for them; a rank whose model cannot be made fails the
// test (gtest) and runs nothing.
void OnEachRank(const v1::JobSpec& spec,
                const std::function<void(int rank, fsdp::FsdpModel& model)>& body);

// Six rows of six inputs of 0.25, each labelled 1: a micro-batch for an MLP whose first
// width is 6.
MicroBatch SixRowsOfQuarters();

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_CPU_RANK_MODEL_H_
