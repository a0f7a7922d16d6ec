#include "bench/load/latency.h"

#include <algorithm>
#include <cmath>

namespace shardwise::load {

Latency Summarize(std::vector<double> seconds) {
  Latency latency;
  latency.count = static_cast<int64_t>(seconds.size());
  if (seconds.empty()) return latency;
  std::sort(seconds.begin(), seconds.end());
  auto at = [&](double q) {
    return seconds[std::min(seconds.size() - 1,
                            static_cast<size_t>(std::ceil(q * seconds.size())) - 1)];
  };
  latency.p50 = at(0.5);
  latency.p99 = at(0.99);
  latency.max = seconds.back();
  return latency;
}

}  // namespace shardwise::load
