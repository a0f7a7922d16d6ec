#ifndef SHARDWISE_WORKER_FSDP_GRAD_SCALER_H_
#define SHARDWISE_WORKER_FSDP_GRAD_SCALER_H_

// Dynamic loss scaling with torch's ShardedGradScaler's rules (docs/semantics.md, "Dynamic
// loss scaling (ShardedGradScaler)"): the scale starts at init_scale (2^16), is multiplied by
// growth_factor (2) after growth_interval (2000) consecutive clean steps and by backoff_factor
// (0.5) after a step with an inf or NaN gradient, which is skipped. The scale is an FP32 value, as
// torch keeps it: each update multiplies it by the factor in FP64 and rounds once, and a
// growth that would overflow FP32 leaves it as it was (torch's _amp_update_scale_); the
// inverse used to unscale is computed in FP64 and rounded to FP32.
// The found-inf flag must be the same on every rank: the trainer all-reduces it.
//
// Thread-safety: none; one scaler per rank.

#include <cstdint>

#include "absl/status/status.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace shardwise::fsdp {

class GradScaler {
 public:
  explicit GradScaler(const v1::GradScaler& spec);

  bool enabled() const { return enabled_; }
  // The factor the loss is multiplied by (1 when disabled).
  float scale() const { return enabled_ ? scale_ : 1.0f; }
  float inverse_scale() const;
  // After a step: `found_inf` (agreed by every rank) backs off and counts a skipped step;
  // otherwise the clean-step tracker advances and the scale grows when it is full.
  void Update(bool found_inf);

  int64_t skipped_steps() const { return skipped_steps_; }
  int32_t growth_tracker() const { return growth_tracker_; }

  // The state as reported and checkpointed, and restoring it (a resumed attempt). A state
  // whose scale is 0 or below is none (the job did not scale) and leaves the scaler as it
  // is; DATA_LOSS, naming the field, for a scale no FP32 holds (NaN, infinite, past
  // FLT_MAX: every step would be skipped) or a negative count.
  v1::GradScalerState State() const;
  absl::Status Restore(const v1::GradScalerState& state);

 private:
  const bool enabled_;
  const double growth_factor_, backoff_factor_;
  const int32_t growth_interval_;
  float scale_;
  int32_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_GRAD_SCALER_H_
