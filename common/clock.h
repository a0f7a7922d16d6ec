#ifndef SHARDWISE_COMMON_CLOCK_H_
#define SHARDWISE_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace shardwise {

// Wall-clock milliseconds since the Unix epoch: the unit of every timestamp Shardwise
// stores or sends.
inline int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_CLOCK_H_
