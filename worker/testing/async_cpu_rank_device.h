#ifndef SHARDWISE_WORKER_TESTING_ASYNC_CPU_RANK_DEVICE_H_
#define SHARDWISE_WORKER_TESTING_ASYNC_CPU_RANK_DEVICE_H_

// The stream-ordering checker for a whole rank: a RankDeviceFactory, in place of
// cuda::CudaRankDevices, whose ranks compute on an AsyncCpuDevice and communicate over
// their groups' Gloo connections through StreamCommunicators placed on the streams and in
// the modes the CUDA factory uses (cuda/cuda_rank_device.cc): the shard group on the
// post-backward stream and the unshard group on the unshard stream, stream-ordered under
// NCCL; the replicate group under NCCL on the all-reduce stream, stream-ordered, after its
// caller's stream and before it; with host-staged Gloo on the post-backward stream. A job given it
// runs as `device: CUDA` (with the job's cuda.collectives) and must equal the same job on the CPU
// bit for bit.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/comm/rank_device.h"
#include "worker/testing/emulated_stream.h"

namespace shardwise::testing {

// Each rank's collectives in the order its threads issued them, across all its
// communicators ("unshard all_gather 96"): under NCCL every rank must launch the same
// sequence (comm/launch_order.h).
class LaunchLogs {
 public:
  void Add(int rank, const std::string& launch) ABSL_LOCKS_EXCLUDED(mu_);
  std::map<int, std::vector<std::string>> ByRank() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<int, std::vector<std::string>> by_rank_ ABSL_GUARDED_BY(mu_);
};

// Each rank's streams are seeded with `timing.seed` plus the rank. With
// `low_precision_storage` the devices keep activations and unsharded parameters in the
// job's 16-bit param_dtype (AsyncCpuDevice). With `launches`, each rank's collectives are
// logged there.
RankDeviceFactory AsyncCpuRankDevices(const StreamTiming& timing,
                                      bool low_precision_storage = false,
                                      std::shared_ptr<LaunchLogs> launches = nullptr);

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_ASYNC_CPU_RANK_DEVICE_H_
