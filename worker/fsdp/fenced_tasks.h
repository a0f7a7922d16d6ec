#ifndef SHARDWISE_WORKER_FSDP_FENCED_TASKS_H_
#define SHARDWISE_WORKER_FSDP_FENCED_TASKS_H_

// Tasks for a communication thread (comm_thread.h) ordered after what the calling thread
// has queued on the device so far: each first makes its lane's stream wait for a fence
// recorded when it was queued, so it sees everything the caller did before. FSDP's
// all-gathers and reductions go through these.

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/comm/comm_thread.h"
#include "worker/compute/device.h"

namespace shardwise::fsdp {

// Queues `task` on `lane`, ordered after the work the calling thread has queued on
// `device` so far (a fence); what it writes is complete on the device when its handle
// reports (it synchronises its stream first).
CommThread::Handle EnqueueAfterFence(Device* device, CommThread& lane,
                                     std::function<absl::Status()> task);
// The same in two parts (CommThread::EnqueueInTwoParts): `start` enqueues work on the
// lane's stream, and the handle's WaitStarted() gives a fence after it; the task is done
// once `collectives_completed` (the collectives' watchdog: Communicator::
// CollectivesCompleted) answers true and the stream has passed that fence. A part that
// fails first lets the collectives settle (polling `collectives_completed` until it
// answers true or an error: it must answer an error only once every collective it watches
// has completed or failed) and synchronises the lane's stream: whoever waits on the task
// may free the buffers its queued work still writes.
CommThread::Handle EnqueueAfterFenceInTwoParts(
    Device* device, CommThread& lane, std::function<absl::Status()> start,
    std::function<absl::StatusOr<bool>()> collectives_completed);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_FENCED_TASKS_H_
