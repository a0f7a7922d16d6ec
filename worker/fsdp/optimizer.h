#ifndef SHARDWISE_WORKER_FSDP_OPTIMIZER_H_
#define SHARDWISE_WORKER_FSDP_OPTIMIZER_H_

// Optimizers on flat fp32 shards, with PyTorch's formulas (docs/semantics.md, "Optimizers"):
// torch.optim.SGD and torch.optim.AdamW (single-tensor path). Padding elements hold zero
// parameters and zero gradients, and both rules keep them at zero.
//
// Thread-safety: none; one optimizer per rank.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/job_spec.pb.h"
#include "worker/compute/device.h"
#include "worker/compute/update_spans.h"
#include "worker/runtime/memory.h"

namespace shardwise::fsdp {

class Optimizer {
 public:
  // `segments` is the number of flat ranges (one per unit) the optimizer will step;
  // their states are allocated on `device` (not owned) on first use, in the
  // optimizer-state category, and updated by its kernels.
  static std::unique_ptr<Optimizer> Create(const v1::OptimizerSpec& spec, int segments,
                                           Device* device);
  virtual ~Optimizer() = default;
  // The names of the state buffers a segment of `spec`'s optimizer has once created
  // (SegmentState's, in its order).
  static std::vector<std::string> StateNames(const v1::OptimizerSpec& spec);

  // The learning rate of the steps from now on (optimizer.lr_schedule sets it each step;
  // the spec's lr until then).
  virtual void set_lr(double lr) = 0;
  // Advances the step counter; call once per optimizer step, before Update.
  virtual void BeginStep() = 0;
  // Updates elements [begin, end) of segment `segment` (of `segment_numel` elements):
  // param[i] in place from grad[i]; `param` and `grad` point at the segment's start.
  // Without `decay` the range takes no weight decay (nanoGPT's second parameter group).
  // Ranges let a segment be stepped piecewise (optimizer overlap steps some parameters in
  // backward); each element must be updated once per step, in the same ranges every step.
  virtual void UpdateRange(int segment, size_t segment_numel, size_t begin, size_t end,
                           float* param, const float* grad, bool decay = true) = 0;
  // The whole segment: param[n] from grad[n].
  void Update(int segment, float* param, const float* grad, size_t n) {
    UpdateRange(segment, n, 0, n, param, grad);
  }
  // Several ranges of a segment at once, as UpdateRange on each: AdamW steps them in one
  // device call (Device::AdamWUpdateSpans: one launch on a GPU where it was one per range).
  virtual void UpdateSpans(int segment, size_t segment_numel, const std::vector<UpdateSpan>& spans,
                           float* param, const float* grad) {
    for (const UpdateSpan& span : spans) {
      UpdateRange(segment, segment_numel, span.begin, span.end, param, grad, span.decay);
    }
  }

  // State for checkpoints: the steps taken, and each segment's named state buffers
  // ("momentum"; "exp_avg", "exp_avg_sq"; device memory), each as long as the segment. A segment
  // whose state was never created (SGD before its first step) has none.
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
  virtual std::vector<std::pair<std::string, const Buffer*>> SegmentState(int segment) const = 0;
  // Restores one named buffer of a segment from host memory (INVALID_ARGUMENT for an
  // unknown name).
  virtual absl::Status RestoreSegmentState(int segment, const std::string& name, const float* data,
                                           size_t n) = 0;
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_OPTIMIZER_H_
