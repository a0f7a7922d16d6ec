#include "worker/train/rank_runtime.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/solo_communicator.h"

namespace shardwise {

absl::StatusOr<std::unique_ptr<RankRuntime>> RankRuntime::Connect(const v1::JobSpec& spec,
                                                                  const fsdp::ShardingPlan& plan,
                                                                  const TrainingContext& context) {
  std::unique_ptr<RankRuntime> runtime(new RankRuntime(context, context.allocator));
  RETURN_IF_ERROR(runtime->ConnectHostGroups(plan));
  if (spec.device() == v1::CUDA) {
    RETURN_IF_ERROR(runtime->MakeAccelerator(spec));
  } else {
    runtime->device_ = &runtime->cpu_;
    runtime->model_groups_ = {runtime->Track(runtime->shard_.host),
                              runtime->Track(runtime->replicate_.host),
                              runtime->Track(runtime->unshard_.host)};
  }
  return runtime;
}

// Each group's ranks (in group order), a name unique within the attempt, and its host
// communicator: the world itself when the group is the world, none needed for a group of
// one, else a Gloo context over the attempt's rendezvous. `unshard` is the shard group
// again over a connection of its own even when the group is the world: the model's
// all-gathers run on a thread of their own beside its reductions (fsdp_model.h).
absl::Status RankRuntime::ConnectHostGroups(const fsdp::ShardingPlan& plan) {
  shard_ = {plan.ShardGroupRanks(), absl::StrCat("shard", plan.replicate_rank)};
  replicate_ = {plan.ReplicateGroupRanks(), absl::StrCat("replicate", plan.shard_rank)};
  unshard_ = {shard_.ranks, absl::StrCat("unshard", plan.replicate_rank)};
  counted_.push_back(&world_gloo_);
  gloo_groups_.push_back(&world_gloo_);
  for (auto* group : {&shard_, &replicate_, &unshard_}) {
    const bool may_share_world = group != &unshard_;
    if (may_share_world && static_cast<int>(group->ranks.size()) == context_.world_size) {
      group->host = &world_gloo_;
      continue;
    }
    if (group->ranks.size() == 1) {
      owned_.push_back(std::make_unique<SoloCommunicator>());
    } else {
      ASSIGN_OR_RETURN(auto connected,
                       GlooCommunicator::ConnectGroup(*context_.store, group->name, group->ranks,
                                                      context_.rank, context_.data_plane));
      gloo_groups_.push_back(connected.get());
      owned_.push_back(std::move(connected));
    }
    group->host = owned_.back().get();
    counted_.push_back(group->host);
  }
  world_ = Track(&world_gloo_);
  return absl::OkStatus();
}

absl::Status RankRuntime::MakeAccelerator(const v1::JobSpec& spec) {
  if (!context_.make_device) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job.device is ", v1::DeviceKind_Name(spec.device()),
        ", but this worker was built without support for it (build with --config=cuda)"));
  }
  RankDeviceRequest request;
  request.spec = &spec;
  request.rank = context_.rank;
  request.shard = shard_;
  request.replicate = replicate_;
  request.unshard = unshard_;
  request.store = context_.store;
  request.timeout = absl::FromChrono(context_.data_plane.timeout);
  request.abort = context_.abort;
  ASSIGN_OR_RETURN(accelerator_, context_.make_device(request));
  device_ = accelerator_->device.get();
  model_groups_ = {Track(accelerator_->shard), Track(accelerator_->replicate),
                   accelerator_->unshard != nullptr ? Track(accelerator_->unshard) : nullptr};
  for (const Communicator* group :
       {accelerator_->shard, accelerator_->replicate, accelerator_->unshard}) {
    if (group != nullptr && std::find(counted_.begin(), counted_.end(), group) == counted_.end()) {
      counted_.push_back(group);
    }
  }
  return absl::OkStatus();
}

Communicator* RankRuntime::Track(Communicator* group) {
  if (context_.position == nullptr && context_.timeline == nullptr &&
      context_.collective_metrics == nullptr) {
    return group;
  }
  // A group that is the world shares the world's recorder.
  if (group == &world_gloo_ && world_ != nullptr) return world_;
  tracked_.push_back(std::make_unique<TrackedCommunicator>(
      group, context_.position, context_.timeline, context_.collective_metrics));
  return tracked_.back().get();
}

void RankRuntime::SetPeerTimeout(std::chrono::milliseconds timeout) {
  for (GlooCommunicator* group : gloo_groups_) group->SetTimeout(timeout);
}

void RankRuntime::SetAcceleratorTimeout(std::chrono::milliseconds timeout) {
  if (accelerator_ == nullptr) return;
  for (Communicator* group :
       {accelerator_->shard, accelerator_->replicate, accelerator_->unshard}) {
    if (group != nullptr) group->SetTimeout(timeout);
  }
}

void RankRuntime::CloseConnections() {
  for (GlooCommunicator* group : gloo_groups_) group->CloseConnections();
  if (accelerator_ != nullptr) {
    accelerator_->AbortCollectives("the rank closed its connections (the membership changed)");
  }
}

void RankRuntime::AbortAcceleratorCollectives(const absl::Status& failure) {
  if (accelerator_ == nullptr) return;
  accelerator_->AbortCollectives(absl::StrCat("the rank failed: ", failure.ToString()));
}

CommStats RankRuntime::Traffic() const {
  CommStats total;
  for (const Communicator* group : counted_) total += group->stats();
  return total;
}

}  // namespace shardwise
