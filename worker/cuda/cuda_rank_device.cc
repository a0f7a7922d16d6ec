#include "worker/cuda/cuda_rank_device.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/monotonic_wait.h"
#include "common/status_macros.h"
#include "worker/comm/group_vote.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/host_staged_communicator.h"
#include "worker/cuda/nccl_communicator.h"

namespace shardwise::cuda {
namespace {

class CudaRankDevice final : public RankDevice {
 public:
  ~CudaRankDevice() override {
    stop_.Notify();
    if (watcher_.joinable()) watcher_.join();
  }

  // Every communicator at once, each on a thread of its own: ncclCommAbort may wait for
  // its communicator's work on the device, which may wait (through a stream) for another
  // communicator's collective that only that one's abort ends.
  void AbortCollectives(const std::string& reason) override {
    std::vector<std::thread> aborts;
    for (NcclCommunicator* comm : nccl_) {
      aborts.emplace_back([comm, &reason] { comm->Abort(reason); });
    }
    for (std::thread& abort : aborts) abort.join();
  }

  // Aborts every NCCL communicator once `abort` is set (polled: the attempt's flag).
  void WatchAbort(const std::atomic<bool>* abort) {
    if (abort == nullptr || nccl_.empty()) return;
    watcher_ = std::thread([this, abort] {
      while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
        if (abort->load()) {
          AbortCollectives("the attempt was aborted");
          return;
        }
      }
    });
  }

  // Views of the NCCL communicators among `owned`, destroyed before them: nothing may
  // abort through it then (the watcher is joined first, and a communicator's own
  // destruction reports no failure, NcclOptions::on_failure).
  std::vector<NcclCommunicator*> nccl_;

 private:
  MonotonicNotification stop_;  // its timed wait is the watcher's poll
  std::thread watcher_;
};

// The group's communicator for `lane`, on that lane's stream.
absl::StatusOr<Communicator*> Connect(const RankDeviceRequest& request,
                                      const RankDeviceRequest::Group& group, Device::CommLane lane,
                                      CudaDevice& device, CudaRankDevice& out) {
  const cudaStream_t stream = device.communication_stream(lane);
  const v1::CudaOptions::Collectives kind = request.spec->cuda().collectives();
  if (kind == v1::CudaOptions::HOST_STAGED_GLOO) {
    out.owned.push_back(std::make_unique<HostStagedCommunicator>(group.host, stream));
    return out.owned.back().get();
  }
  const auto it = std::find(group.ranks.begin(), group.ranks.end(), request.rank);
  if (it == group.ranks.end()) {
    return absl::InternalError(
        absl::StrCat("rank ", request.rank, " is not in group ", group.name));
  }
  NcclOptions options;
  options.timeout = request.timeout;
  // The all-reduce stream is nobody's computing stream: it follows the caller's, and the
  // caller's follows each of its collectives.
  if (lane == Device::CommLane::kAllReduce) {
    options.stream_of_caller = [&device] { return device.CurrentStream(); };
  }
  // Every lane's collectives return once enqueued: the training thread orders its compute
  // after the all-gathers and reductions on the device instead of waiting for them on the
  // host (FsdpModel::Unshard, GradientReducer::Reduce), the reduction stream follows the
  // all-reduce stream's collectives the same way (stream_of_caller), and the lane's thread
  // watches their completion. So a lane's launch ends without a host wait, and the two
  // threads' turns at launching (comm/launch_order.h) cost no overlap. Callers that read
  // a result on the host wait for it (Communicator::WaitForCollectives).
  options.stream_ordered = true;
  options.synchronous = device.synchronous();
  options.on_failure = [rank = &out, name = group.name](const absl::Status& why) {
    rank->AbortCollectives(
        absl::StrCat("the rank's communicator of group ", name, " failed: ", why.message()));
  };
  ASSIGN_OR_RETURN(
      std::unique_ptr<NcclCommunicator> comm,
      NcclCommunicator::Connect(*request.store, absl::StrCat(group.name, "/nccl"),
                                static_cast<int>(it - group.ranks.begin()),
                                static_cast<int>(group.ranks.size()), stream, options));
  out.nccl_.push_back(comm.get());
  out.owned.push_back(std::move(comm));
  return out.owned.back().get();
}

// Whether the all-gathers get a thread and a communicator of their own. Under NCCL only
// where every rank of the shard group keeps the two threads' launch order
// (nccl_launch_plan.h), which each decides from its own host: one that cannot makes the
// whole group run them on the reduction's thread, instead of leaving its peers to wait
// for a communicator it never joins.
absl::StatusOr<bool> AllGathersOnTheirOwnThread(const RankDeviceRequest& request) {
  if (request.unshard.host == nullptr) return false;
  if (request.spec->cuda().collectives() == v1::CudaOptions::HOST_STAGED_GLOO) return true;
  const NcclLaunchPlan& mine = ProcessNcclLaunchPlan();
  if (request.store == nullptr || request.unshard.ranks.size() < 2) return mine.two_threads;
  ASSIGN_OR_RETURN(
      const bool every,
      EveryRankVotesYes(*request.store, absl::StrCat(request.unshard.name, "/two_threads"),
                        request.unshard.ranks, request.rank, mine.two_threads));
  if (mine.two_threads && !every) {
    LogWarning(LogContext(),
               absl::StrCat("group ", request.unshard.name,
                            ": another rank's NCCL keeps no launch order across communicators; "
                            "this rank too runs its all-gathers on the reduction's thread (",
                            mine.description, ")"));
  }
  return every;
}

}  // namespace

RankDeviceFactory CudaRankDevices(int gpu) {
  return [gpu](const RankDeviceRequest& request) -> absl::StatusOr<std::unique_ptr<RankDevice>> {
    CudaDeviceOptions options;
    options.gpu = gpu;
    options.allow_tf32 = request.spec->cuda().allow_tf32();
    options.fused_attention_kernel = request.spec->cuda().fused_attention_kernel();
    options.attention_backward = request.spec->cuda().attention_backward();
    options.storage = request.spec->cuda().storage();
    options.synchronous = SynchronousModeRequested();
    auto out = std::make_unique<CudaRankDevice>();
    ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> created, CudaDevice::Create(options));
    CudaDevice& device = *created;
    // Owned by `out` at once (declared first, destroyed last): on an early return below,
    // the communicators connected so far, which use its streams, end before it.
    out->device = std::move(created);
    using Lane = Device::CommLane;
    ASSIGN_OR_RETURN(out->shard, Connect(request, request.shard, Lane::kReduction, device, *out));
    // The replicate group's all-reduce on a stream of its own, as FSDP's HYBRID
    // strategies have it (host staging uses the reduction stream: each of its copies
    // waits on the host, and callers from other streams synchronise first).
    const Lane replicate_lane =
        request.spec->cuda().collectives() == v1::CudaOptions::HOST_STAGED_GLOO ? Lane::kReduction
                                                                                : Lane::kAllReduce;
    ASSIGN_OR_RETURN(out->replicate,
                     Connect(request, request.replicate, replicate_lane, device, *out));
    ASSIGN_OR_RETURN(const bool own_thread, AllGathersOnTheirOwnThread(request));
    if (own_thread) {
      ASSIGN_OR_RETURN(out->unshard,
                       Connect(request, request.unshard, Lane::kUnshard, device, *out));
    }
    out->WatchAbort(request.abort);
    return out;
  };
}

}  // namespace shardwise::cuda
