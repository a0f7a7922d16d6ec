#ifndef SHARDWISE_WORKER_COMPUTE_CPU_ROW_MAX_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_ROW_MAX_H_

// The largest of x[0, n), n >= 1, over 16 interleaved lanes (the last group too, under a
// mask): independent chains the compiler vectorises (std::max_element's, which tracks a
// position, does not), with the same answer as a scan in order, since the maximum of
// numbers does not depend on their order (NaN aside: a row holding one is lost either
// way).

#include <cstdint>

namespace shardwise::cpu {

template <typename T>
__attribute__((always_inline)) inline T RowMax(const T* x, int64_t n) {
  constexpr int kLanes = 16;
  T lanes[kLanes];
  // Every lane starts at a value of the row, so that a lane no group reaches (a row
  // shorter than the lanes) cannot win.
  for (int l = 0; l < kLanes; ++l) lanes[l] = x[0];
  const int64_t whole = n - n % kLanes;
  for (int64_t j = 0; j < whole; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
  }
  if (whole < n) {
    for (int l = 0; l < kLanes; ++l) {
      lanes[l] = whole + l < n && x[whole + l] > lanes[l] ? x[whole + l] : lanes[l];
    }
  }
  T max = lanes[0];
  for (int l = 1; l < kLanes; ++l) max = lanes[l] > max ? lanes[l] : max;
  return max;
}

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_ROW_MAX_H_
