#ifndef SHARDWISE_BENCH_LOAD_LATENCY_H_
#define SHARDWISE_BENCH_LOAD_LATENCY_H_

// Latency samples summarised: p50, p99 and the maximum, in seconds.

#include <cstdint>
#include <vector>

namespace shardwise::load {

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
  int64_t count = 0;
};
Latency Summarize(std::vector<double> seconds);

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_LATENCY_H_
