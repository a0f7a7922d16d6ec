#ifndef SHARDWISE_WORKER_COMPUTE_CPU_TEST_VALUES_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_TEST_VALUES_H_

// The CPU kernels' tests' inputs: n values drawn uniformly from [-scale, scale] by a
// seeded generator, the same on every run.

#include <cstddef>
#include <random>
#include <vector>

namespace shardwise::cpu {

template <typename T = float>
std::vector<T> RandomValues(size_t n, int seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  std::vector<T> values(n);
  for (T& x : values) x = static_cast<T>(dist(gen));
  return values;
}

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_TEST_VALUES_H_
