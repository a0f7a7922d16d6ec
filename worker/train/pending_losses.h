#ifndef SHARDWISE_WORKER_TRAIN_PENDING_LOSSES_H_
#define SHARDWISE_WORKER_TRAIN_PENDING_LOSSES_H_

// The losses of the steps a rank has run since it last read them.
//
// Reading a loss makes the host wait for the device to finish the step that computed it.
// On a GPU that wait empties the stream: the next step's kernels are not queued until the
// host is back. So each micro-step writes its loss into its own slot of a device buffer
// and the step runs on; every job.loss_read_interval_steps steps (and where a reader
// needs the value: the last step, a checkpoint) the rank copies all pending slots to the
// host in one transfer. The values are those a read every step would give, only later.
// On the CPU the slots are host memory and only the timing of the agreement changes.
//
// Thread-safety: used by the training thread only.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"
#include "worker/compute/device.h"
#include "worker/runtime/memory.h"

namespace shardwise {

// Steps between reads: job.loss_read_interval_steps, 1 when unset.
int LossReadInterval(const v1::JobSpec& spec);

// Whether the losses pending after `steps_done` steps must be read now: the interval is
// full, or the step is the job's last, or a checkpoint follows (a checkpoint is written
// only after its steps' losses were found finite).
bool LossReadDue(const v1::JobSpec& spec, int64_t steps_done, int pending_steps);

class PendingLosses {
 public:
  struct StepLoss {
    int64_t step = 0;
    double local_loss = 0;  // the rank's mean over its micro-steps, unscaled
  };

  // Slots for `interval` steps of `micro_steps` micro-steps each.
  PendingLosses(Device* device, int interval, int micro_steps);

  // Where micro-step `micro` of the step being run writes its loss (a device double).
  double* Slot(int micro);
  // The step being run is over: its micro-steps' losses, each divided by `scale` (the
  // loss scaler's scale it ran with), sum to its local loss.
  void EndStep(int64_t step, double scale);

  int size() const { return static_cast<int>(steps_.size()); }
  bool full() const { return size() == interval_; }

  // Waits for the pending steps' losses, copies them to the host at once and empties;
  // the steps in order. A device error is returned here.
  absl::StatusOr<std::vector<StepLoss>> Take();

 private:
  struct PendingStep {
    int64_t step;
    double scale;
  };

  Device* const device_;
  const int interval_;
  const int micro_steps_;
  Buffer slots_;  // [interval][micro_steps] doubles on the device
  std::vector<PendingStep> steps_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_PENDING_LOSSES_H_
