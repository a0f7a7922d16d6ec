#ifndef SHARDWISE_BENCH_BEST_SECONDS_H_
#define SHARDWISE_BENCH_BEST_SECONDS_H_

// The kernel benchmarks' timer: the fastest of `rounds` runs of fn, in seconds. The
// fastest, not the mean: on a shared machine every disturbance only adds time.

#include <algorithm>
#include <chrono>

namespace shardwise::bench {

template <typename Fn>
double BestSeconds(int rounds, Fn&& fn) {
  double best = 1e30;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace shardwise::bench

#endif  // SHARDWISE_BENCH_BEST_SECONDS_H_
