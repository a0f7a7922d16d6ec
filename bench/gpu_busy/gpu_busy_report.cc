// Prints how busy the GPU kept during each training step of a trace that
// cupti_trace_injection.cc wrote (busy_trace.h).
//
// usage: gpu_busy_report TRACE STEP_MARKER [SKIP_STEPS (3)] [STEPS_RUN]
//   STEP_MARKER: a substring of the name of the activities that end each step (Shardwise:
//   AdamW, one kernel per FSDP unit; bench/pytorch_gpu_timing.py under a trace:
//   spin_kernel, one per step).
//   STEPS_RUN: the steps the trace holds, where each ends with several markers (their
//   count divided by it); without it, each marker ends a step.

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "bench/gpu_busy/busy_trace.h"

namespace {

constexpr char kUsage[] = "usage: gpu_busy_report TRACE STEP_MARKER [SKIP_STEPS] [STEPS_RUN]\n";

}  // namespace

int main(int argc, char** argv) {
  int skip = 3, steps_run = 0;
  if (argc < 3 || argc > 5 || (argc >= 4 && !absl::SimpleAtoi(argv[3], &skip)) ||
      (argc == 5 && !absl::SimpleAtoi(argv[4], &steps_run))) {
    std::cerr << kUsage;
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "gpu_busy_report: cannot read the trace " << argv[1] << "\n";
    return 1;
  }
  auto trace = shardwise::gpu_busy::ParseTrace(in);
  if (!trace.ok()) {
    std::cerr << "gpu_busy_report: " << argv[1] << ": " << trace.status().message() << "\n";
    return 1;
  }
  const size_t activities = trace->size();
  absl::StatusOr<int> per_step = 1;
  if (steps_run > 0) per_step = shardwise::gpu_busy::MarkersPerStep(*trace, argv[2], steps_run);
  if (!per_step.ok()) {
    std::cerr << "gpu_busy_report: " << argv[1] << ": " << per_step.status().message() << "\n";
    return 1;
  }
  const absl::StatusOr<std::string> summary = shardwise::gpu_busy::Summarize(
      shardwise::gpu_busy::BusyPerStep(*std::move(trace), argv[2], *per_step), skip);
  if (!summary.ok()) {
    std::cerr << "gpu_busy_report: " << argv[1] << " (" << activities
              << " activities, step marker '" << argv[2] << "'): " << summary.status().message()
              << "\n";
    return 1;
  }
  std::cout << *summary << "\n";
  return 0;
}
