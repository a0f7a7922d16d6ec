#include "worker/testing/async_cpu_rank_device.h"

#include <memory>

#include "worker/testing/async_cpu_device.h"
#include "worker/testing/stream_communicator.h"

namespace shardwise::testing {
namespace {

using Lane = Device::CommLane;

Communicator* Connect(Communicator* host, AsyncCpuDevice& device, Lane lane,
                      const StreamCommunicatorOptions& options, RankDevice& out) {
  out.owned.push_back(
      std::make_unique<StreamCommunicator>(host, &device, &device.LaneStream(lane), options));
  return out.owned.back().get();
}

}  // namespace

RankDeviceFactory AsyncCpuRankDevices(const StreamTiming& timing, bool low_precision_storage) {
  return [timing, low_precision_storage](
             const RankDeviceRequest& request) -> absl::StatusOr<std::unique_ptr<RankDevice>> {
    StreamTiming rank_timing = timing;
    rank_timing.seed = timing.seed + static_cast<uint64_t>(request.rank);
    auto device = std::make_unique<AsyncCpuDevice>(rank_timing, low_precision_storage);
    auto out = std::make_unique<RankDevice>();
    const bool nccl = request.spec->cuda().collectives() != v1::CudaOptions::HOST_STAGED_GLOO;
    StreamCommunicatorOptions shard;
    shard.stream_ordered = nccl;
    out->shard = Connect(request.shard.host, *device, Lane::kReduction, shard, *out);
    StreamCommunicatorOptions replicate;
    replicate.follow_caller = nccl;
    out->replicate = Connect(request.replicate.host, *device,
                             nccl ? Lane::kAllReduce : Lane::kReduction, replicate, *out);
    if (request.unshard.host != nullptr) {
      StreamCommunicatorOptions unshard;
      unshard.stream_ordered = nccl;
      out->unshard = Connect(request.unshard.host, *device, Lane::kUnshard, unshard, *out);
    }
    out->device = std::move(device);
    return out;
  };
}

}  // namespace shardwise::testing
