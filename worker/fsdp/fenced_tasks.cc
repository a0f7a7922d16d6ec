#include "worker/fsdp/fenced_tasks.h"

#include <memory>
#include <new>
#include <utility>

#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/memory.h"

namespace shardwise::fsdp {
namespace {

using CompletionPoll = std::function<absl::StatusOr<bool>()>;

// `task`, whose allocation failure (a std::bad_alloc from the device's allocator, which
// may come after it enqueued a collective) is its error like any other, so the failure
// path below still lets that collective settle.
absl::Status RunTask(const std::function<absl::Status()>& task) {
  try {
    return task();
  } catch (const std::bad_alloc& failure) {
    return AllocationFailureStatus(failure);
  }
}

// A part that failed: the collectives it enqueued settle first (complete, or end in an
// error: their watchdog's poll aborts one whose peer is lost or whose attempt was
// aborted, which ends its kernel), then its stream's work ends, before the failure is
// reported: whoever waits on the task may free buffers the queued work still uses.
absl::Status EndQueuedWork(Device* device, absl::Status failure,
                           const CompletionPoll& collectives_completed) {
  // Settled either way: their own error, if any, is not this task's to report.
  PollUntilCompleted(collectives_completed, absl::Microseconds(50)).IgnoreError();
  device->Synchronize().IgnoreError();
  return failure;
}

}  // namespace

CommThread::Handle EnqueueAfterFence(Device* device, CommThread& lane,
                                     std::function<absl::Status()> task) {
  return lane.Enqueue(
      [device, fence = device->RecordFence(), task = std::move(task)]() -> absl::Status {
        device->WaitForFence(fence.get());
        const absl::Status status = RunTask(task);
        const absl::Status synced = device->Synchronize();
        return status.ok() ? synced : status;
      });
}

CommThread::Handle EnqueueAfterFenceInTwoParts(
    Device* device, CommThread& lane, std::function<absl::Status()> start,
    std::function<absl::StatusOr<bool>()> collectives_completed) {
  // Both parts poll the collectives: the second to learn they completed, either to let
  // them settle after a failure.
  auto completed = std::make_shared<CompletionPoll>(std::move(collectives_completed));
  return lane.EnqueueInTwoParts(
      [device, issued = device->RecordFence(), start = std::move(start),
       completed]() -> absl::StatusOr<CommThread::Fence> {
        // A fence that could not be recorded orders nothing: its error (kept by the
        // device) fails the task before anything relies on it.
        absl::Status status = device->status();
        if (status.ok()) {
          device->WaitForFence(issued.get());
          status = RunTask(start);
        }
        CommThread::Fence end;
        if (status.ok()) {
          end = device->RecordFence();
          status = device->status();
        }
        if (!status.ok()) return EndQueuedWork(device, status, *completed);
        return end;
      },
      [device, completed](const CommThread::Fence& end) -> absl::StatusOr<bool> {
        const absl::StatusOr<bool> done = (*completed)();
        absl::Status status = done.status();
        if (status.ok()) {
          if (!*done || !device->FencePassed(end.get())) return false;
          status = device->status();
        }
        if (!status.ok()) return EndQueuedWork(device, status, *completed);
        return true;
      });
}

}  // namespace shardwise::fsdp
