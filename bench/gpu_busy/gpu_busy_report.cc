// Prints how busy the GPU kept during each training step of a trace that
// cupti_trace_injection.cc wrote (busy_trace.h).
//
// usage: gpu_busy_report TRACE STEP_MARKER [SKIP_STEPS (3)]
//   STEP_MARKER: a substring of the name of the activity that ends each step (Shardwise:
//   AdamW; bench/pytorch_gpu_timing.py under a trace: spin_kernel).

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "bench/gpu_busy/busy_trace.h"

int main(int argc, char** argv) {
  int skip = 3;
  if (argc < 3 || argc > 4 || (argc == 4 && !absl::SimpleAtoi(argv[3], &skip))) {
    std::cerr << "usage: gpu_busy_report TRACE STEP_MARKER [SKIP_STEPS]\n";
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
  auto summary = shardwise::gpu_busy::Summarize(
      shardwise::gpu_busy::BusyPerStep(*std::move(trace), argv[2]), skip);
  if (!summary.ok()) {
    std::cerr << "gpu_busy_report: " << argv[1] << " (" << activities
              << " activities, step marker '" << argv[2] << "'): " << summary.status().message()
              << "\n";
    return 1;
  }
  std::cout << *summary << "\n";
  return 0;
}
