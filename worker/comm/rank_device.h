#ifndef SHARDWISE_WORKER_COMM_RANK_DEVICE_H_
#define SHARDWISE_WORKER_COMM_RANK_DEVICE_H_

// What a rank of an accelerator job computes and communicates with: its Device, and the
// communicators of its two FSDP groups over that device's memory. The trainer asks a
// RankDeviceFactory for one when the job's device is not the CPU; the worker binary of a
// CUDA build supplies the CUDA factory (cuda/cuda_rank_device.h), and a CPU-only build
// none, so a CUDA job there fails with FAILED_PRECONDITION.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "proto/job_spec.pb.h"
#include "worker/comm/communicator.h"
#include "worker/compute/device.h"

namespace shardwise {

class RankDevice {
 public:
  // Declared first: destroyed last, after the communicators that use its streams.
  std::unique_ptr<Device> device;
  Communicator* shard = nullptr;      // the shard group, over device buffers
  Communicator* replicate = nullptr;  // the replicate group, over device buffers
  Communicator* unshard = nullptr;    // the shard group's all-gather connection
  std::vector<std::unique_ptr<Communicator>> owned;
  virtual ~RankDevice() = default;
  // The rank's attempt failed: collectives in flight end now, with `reason`, instead of
  // waiting for a peer that may be gone until their deadline (which would hold the
  // model's teardown as long). From any thread. Collectives that wait only on the host
  // (Gloo's) are ended by closing their connections instead (RankRuntime).
  virtual void AbortCollectives(const std::string& reason) {}
};

struct RankDeviceRequest {
  const v1::JobSpec* spec = nullptr;
  int rank = 0;  // global rank
  // Each group: its global ranks in group order, a name unique within the attempt, and
  // its host communicator (Gloo, over host memory; the host-staged path wraps it).
  struct Group {
    std::vector<int> ranks;
    std::string name;
    Communicator* host = nullptr;
  };
  // `unshard` is the shard group again, over its own connection, for the all-gathers'
  // thread and stream (fsdp_model.h).
  Group shard, replicate, unshard;
  gloo::rendezvous::Store* store = nullptr;    // the attempt's rendezvous (NCCL unique ids)
  absl::Duration timeout = absl::Minutes(10);  // a collective running longer is aborted
  const std::atomic<bool>* abort = nullptr;    // set when the attempt is aborted
};

using RankDeviceFactory =
    std::function<absl::StatusOr<std::unique_ptr<RankDevice>>(const RankDeviceRequest&)>;

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_RANK_DEVICE_H_
