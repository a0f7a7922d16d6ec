#ifndef SHARDWISE_WORKER_COMPUTE_CPU_LANE_SUM_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_LANE_SUM_H_

// The sum of term(0) ... term(n - 1) in `Acc` over `kLanes` interleaved lanes: term j
// into lane j % kLanes (the last group's missing terms count as zeros, so that group
// vectorises too, under a mask), the lanes then added pairwise ((l0 + l1) + (l2 + l3)
// for four). Independent chains, which the compiler vectorises where one running sum is
// a chain of dependent adds, in one fixed order, so a result does not depend on the
// vector width the CPU has. The row kernels' reductions (LayerNorm's moments,
// cross-entropy's and the fused attention's sums of exponentials) all come through here.

#include <cstdint>

namespace shardwise::cpu {

template <typename Acc, int kLanes, typename Term>
__attribute__((always_inline)) inline Acc LaneSum(int64_t n, const Term& term) {
  static_assert(kLanes >= 2 && (kLanes & (kLanes - 1)) == 0, "kLanes: a power of two");
  Acc lanes[kLanes] = {};
  const int64_t whole = n - n % kLanes;
  for (int64_t j = 0; j < whole; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(j + l);
  }
  if (whole < n) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += whole + l < n ? term(whole + l) : Acc{0};
  }
  for (int width = kLanes; width > 1; width /= 2) {
    for (int l = 0; l < width / 2; ++l) lanes[l] = lanes[2 * l] + lanes[2 * l + 1];
  }
  return lanes[0];
}

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_LANE_SUM_H_
