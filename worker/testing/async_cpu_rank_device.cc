#include "worker/testing/async_cpu_rank_device.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/testing/async_cpu_device.h"
#include "worker/testing/stream_communicator.h"

namespace shardwise::testing {
namespace {

using Lane = Device::CommLane;

// The communicator of `host` on `lane`'s stream; `group` names it in the launch log.
Communicator* Connect(Communicator* host, AsyncCpuDevice& device, Lane lane, const char* group,
                      StreamCommunicatorOptions options, const std::shared_ptr<LaunchLogs>& logs,
                      int rank, RankDevice& out) {
  if (logs != nullptr) {
    options.on_issue = [logs, rank, group](const std::string& launch) {
      logs->Add(rank, absl::StrCat(group, " ", launch));
    };
  }
  out.owned.push_back(
      std::make_unique<StreamCommunicator>(host, &device, &device.LaneStream(lane), options));
  return out.owned.back().get();
}

}  // namespace

void LaunchLogs::Add(int rank, const std::string& launch) {
  absl::MutexLock lock(&mu_);
  by_rank_[rank].push_back(launch);
}

std::map<int, std::vector<std::string>> LaunchLogs::ByRank() const {
  absl::MutexLock lock(&mu_);
  return by_rank_;
}

RankDeviceFactory AsyncCpuRankDevices(const StreamTiming& timing, bool low_precision_storage,
                                      std::shared_ptr<LaunchLogs> launches) {
  return [timing, low_precision_storage, launches = std::move(launches)](
             const RankDeviceRequest& request) -> absl::StatusOr<std::unique_ptr<RankDevice>> {
    StreamTiming rank_timing = timing;
    rank_timing.seed = timing.seed + static_cast<uint64_t>(request.rank);
    auto device = std::make_unique<AsyncCpuDevice>(rank_timing, low_precision_storage);
    auto out = std::make_unique<RankDevice>();
    const bool nccl = request.spec->cuda().collectives() != v1::CudaOptions::HOST_STAGED_GLOO;
    const int rank = request.rank;
    StreamCommunicatorOptions shard;
    shard.stream_ordered = nccl;
    out->shard = Connect(request.shard.host, *device, Lane::kReduction, "shard", shard, launches,
                         rank, *out);
    StreamCommunicatorOptions replicate;
    replicate.follow_caller = nccl;
    replicate.stream_ordered = nccl;
    out->replicate =
        Connect(request.replicate.host, *device, nccl ? Lane::kAllReduce : Lane::kReduction,
                "replicate", replicate, launches, rank, *out);
    if (request.unshard.host != nullptr) {
      StreamCommunicatorOptions unshard;
      unshard.stream_ordered = nccl;
      out->unshard = Connect(request.unshard.host, *device, Lane::kUnshard, "unshard", unshard,
                             launches, rank, *out);
    }
    out->device = std::move(device);
    return out;
  };
}

}  // namespace shardwise::testing
