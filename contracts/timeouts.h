#ifndef SHARDWISE_CONTRACTS_TIMEOUTS_H_
#define SHARDWISE_CONTRACTS_TIMEOUTS_H_

// The longest timeout the coordinator's flags may set and a worker takes from an
// assignment (collective_timeout_ms, join_wait_ms): 30 days. Workers turn them into
// deadlines in std::chrono's nanoseconds, which overflow past 292 years: a value meant
// as "never" (INT64_MAX) would have put every deadline in the past.

#include <cstdint>

namespace shardwise {

inline constexpr int64_t kMaxTimeoutMilliseconds = int64_t{30} * 24 * 60 * 60 * 1000;

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_TIMEOUTS_H_
