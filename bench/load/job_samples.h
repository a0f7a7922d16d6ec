#ifndef SHARDWISE_BENCH_LOAD_JOB_SAMPLES_H_
#define SHARDWISE_BENCH_LOAD_JOB_SAMPLES_H_

// A job's progress as a benchmark's client saw it, polled every few milliseconds, and
// what the samples tell: when a step was first seen, and the rate between two steps.

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace shardwise::load {

struct Sample {
  absl::Time at;
  int32_t attempt = 0;
  int64_t step = 0;
};

// When the job (in `attempt`, or any with 0) was first seen at `step` or beyond.
inline absl::Time FirstAt(const std::vector<Sample>& samples, int64_t step, int32_t attempt = 0) {
  for (const Sample& s : samples) {
    if (s.step >= step && (attempt == 0 || s.attempt == attempt)) return s.at;
  }
  return absl::InfiniteFuture();
}

// Steps per second between steps `from` and `to` (of one attempt, or any with 0).
inline double Rate(const std::vector<Sample>& samples, int64_t from, int64_t to,
                   int32_t attempt = 0) {
  const absl::Duration took = FirstAt(samples, to, attempt) - FirstAt(samples, from, attempt);
  return static_cast<double>(to - from) / absl::ToDoubleSeconds(took);
}

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_JOB_SAMPLES_H_
