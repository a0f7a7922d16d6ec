#include "worker/fsdp/fenced_tasks.h"

#include <utility>

namespace shardwise::fsdp {
namespace {

// A part that failed: its queued work ends before the failure is reported.
absl::Status EndQueuedWork(Device* device, absl::Status failure) {
  device->Synchronize().IgnoreError();
  return failure;
}

}  // namespace

CommThread::Handle EnqueueAfterFence(Device* device, CommThread& lane,
                                     std::function<absl::Status()> task) {
  return lane.Enqueue(
      [device, fence = device->RecordFence(), task = std::move(task)]() -> absl::Status {
        device->WaitForFence(fence.get());
        const absl::Status status = task();
        const absl::Status synced = device->Synchronize();
        return status.ok() ? synced : status;
      });
}

CommThread::Handle EnqueueAfterFenceInTwoParts(
    Device* device, CommThread& lane, std::function<absl::Status()> start,
    std::function<absl::StatusOr<bool>()> collectives_completed) {
  return lane.EnqueueInTwoParts(
      [device, issued = device->RecordFence(),
       start = std::move(start)]() -> absl::StatusOr<CommThread::Fence> {
        // A fence that could not be recorded orders nothing: its error (kept by the
        // device) fails the task before anything relies on it.
        absl::Status status = device->status();
        if (status.ok()) {
          device->WaitForFence(issued.get());
          status = start();
        }
        CommThread::Fence end;
        if (status.ok()) {
          end = device->RecordFence();
          status = device->status();
        }
        if (!status.ok()) return EndQueuedWork(device, status);
        return end;
      },
      [device, collectives_completed = std::move(collectives_completed)](
          const CommThread::Fence& end) -> absl::StatusOr<bool> {
        const absl::StatusOr<bool> completed = collectives_completed();
        absl::Status status = completed.status();
        if (status.ok()) {
          if (!*completed || !device->FencePassed(end.get())) return false;
          status = device->status();
        }
        if (!status.ok()) return EndQueuedWork(device, status);
        return true;
      });
}

}  // namespace shardwise::fsdp
