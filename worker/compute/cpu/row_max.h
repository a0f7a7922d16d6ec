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
  if (n < kLanes) {
    T max = x[0];
    for (int64_t j = 1; j < n; ++j) max = x[j] > max ? x[j] : max;
    return max;
  }
  T lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = x[l];
  const int64_t whole = n - n % kLanes;
  for (int64_t j = kLanes; j < whole; j += kLanes) {
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
