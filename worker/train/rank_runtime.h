#ifndef SHARDWISE_WORKER_TRAIN_RANK_RUNTIME_H_
#define SHARDWISE_WORKER_TRAIN_RANK_RUNTIME_H_

// What one rank of one attempt computes and communicates with: the world group, its
// FSDP groups (shard, replicate, and the shard group's second connection for the
// all-gathers), each wrapped to record the rank's position and spans, and its Device:
// the CPU with Gloo groups, or an accelerator with its own communicators (rank_device.h).
// Each group counts its own traffic.
//
// Thread-safety: built and used by the rank's training thread; the model's communication
// threads use the groups it hands them.

#include <chrono>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/fsdp_layout.h"
#include "proto/job_spec.pb.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/tracked_communicator.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/fsdp/comm_hooks.h"
#include "worker/train/trainer.h"

namespace shardwise {

class RankRuntime {
 public:
  // Connects the groups of `plan` over the attempt's rendezvous; asks context.make_device
  // for an accelerator when spec.device is not the CPU (FAILED_PRECONDITION without one).
  static absl::StatusOr<std::unique_ptr<RankRuntime>> Connect(const v1::JobSpec& spec,
                                                              const fsdp::ShardingPlan& plan,
                                                              const TrainingContext& context);

  Device* device() { return device_; }
  // The world group, for the step's small host collectives (loss, found-inf, barriers).
  Communicator* world() { return world_; }
  // The model's groups, over the device's memory.
  const fsdp::Groups& model_groups() const { return model_groups_; }
  // The shard group over host memory, whatever the device: for small host collectives
  // among the group (the commit vote's second round).
  Communicator* host_shard_group() { return shard_.host; }
  // Every host Gloo group of the rank (the world included): how long an operation waits
  // for a peer, and closing this rank's connections so that peers waiting on it in any
  // group fail at once (a membership change; the accelerator's collectives are aborted
  // with it).
  void SetPeerTimeout(std::chrono::milliseconds timeout);
  // How long the accelerator's collectives (NCCL's) wait for their peers from now on.
  void SetAcceleratorTimeout(std::chrono::milliseconds timeout);
  void CloseConnections();
  // The rank's attempt failed with `failure`: the accelerator's collectives in flight end
  // now (RankDevice::AbortCollectives), so the model's teardown does not wait for them.
  void AbortAcceleratorCollectives(const absl::Status& failure);
  // Bytes through every group so far (a group that is the world counted once).
  CommStats Traffic() const;

 private:
  RankRuntime(const TrainingContext& context, Allocator* allocator)
      : context_(context), world_gloo_(context.world), cpu_(allocator) {}
  absl::Status ConnectHostGroups(const fsdp::ShardingPlan& plan);
  absl::Status MakeAccelerator(const v1::JobSpec& spec);
  // `group` wrapped to record position and spans (itself when there is nothing to record).
  Communicator* Track(Communicator* group);

  const TrainingContext context_;
  GlooCommunicator world_gloo_;
  std::vector<std::unique_ptr<Communicator>> owned_;
  std::vector<GlooCommunicator*> gloo_groups_;  // the world and every group connected here
  std::vector<std::unique_ptr<TrackedCommunicator>> tracked_;
  RankDeviceRequest::Group shard_, replicate_, unshard_;
  Communicator* world_ = nullptr;
  CpuDevice cpu_;
  // Declared after the host groups it may wrap; destroyed before them.
  std::unique_ptr<RankDevice> accelerator_;
  Device* device_ = nullptr;
  fsdp::Groups model_groups_;
  std::vector<const Communicator*> counted_;  // every group once
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_RANK_RUNTIME_H_
