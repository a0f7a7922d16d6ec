#ifndef SHARDWISE_BENCH_GPU_BUSY_BUSY_TRACE_H_
#define SHARDWISE_BENCH_GPU_BUSY_BUSY_TRACE_H_

// How busy a GPU kept during each training step, from a trace of what it ran (each
// kernel, copy and memset with its start and end on the GPU's clock, as
// cupti_trace_injection.cc records them): the fraction of each step during which at least
// one of them was running. Overlapping work on several streams counts once; a gap where
// nothing runs (the GPU waiting for the host, or for a host synchronisation) counts as
// idle. Steps are found by a marker: the spans between the ends of the activities whose
// name contains it, each step ending with the same number of them (Shardwise's AdamW
// kernels, one per FSDP unit, end each step; the PyTorch side launches one marker kernel
// before each step).

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise::gpu_busy {

// One kernel, copy or memset, in nanoseconds on the GPU's clock.
struct DeviceActivity {
  int64_t start_ns = 0, end_ns = 0;
  std::string name;
};

struct StepBusy {
  int64_t begin_ns = 0, end_ns = 0;
  int64_t busy_ns = 0;  // within [begin_ns, end_ns)
  double fraction() const;
};

// The steps between the ends of every `markers_per_step`-th marker activity (the last of
// each step's), each with the length of the union of every activity's interval within
// it. Fewer than two steps' markers: no step.
std::vector<StepBusy> BusyPerStep(std::vector<DeviceActivity> activities,
                                  std::string_view step_marker, int markers_per_step = 1);

// How many marker activities end each of `steps_run` steps: their count divided by it.
// FAILED_PRECONDITION where the count is not a positive multiple of `steps_run` (a
// marker that does not end steps evenly, or a trace cut short).
absl::StatusOr<int> MarkersPerStep(const std::vector<DeviceActivity>& activities,
                                   std::string_view step_marker, int steps_run);

// The trace's text form: one activity per line, "START_NS<TAB>END_NS<TAB>NAME".
std::string FormatActivity(const DeviceActivity& activity);
// INVALID_ARGUMENT naming the line for one that is not START<TAB>END<TAB>NAME with
// START <= END.
absl::StatusOr<std::vector<DeviceActivity>> ParseTrace(std::istream& in);

// "busy 97.3% of a step (median of 17 steps after 3 skipped; least 95.1%, most 98.0%;
// step 71.2 ms)"; `skip` steps are left out first (warm-up). FAILED_PRECONDITION when no
// step is left.
absl::StatusOr<std::string> Summarize(const std::vector<StepBusy>& steps, int skip);

}  // namespace shardwise::gpu_busy

#endif  // SHARDWISE_BENCH_GPU_BUSY_BUSY_TRACE_H_
