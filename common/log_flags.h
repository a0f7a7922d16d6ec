#ifndef SHARDWISE_COMMON_LOG_FLAGS_H_
#define SHARDWISE_COMMON_LOG_FLAGS_H_

// The daemons' logging flags, defined once for both: --log_format=text|json and
// --log_level=debug|info|warning|error (common/log.h).

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardwise {

// ConfigureLogging with the flags' values, after absl::ParseCommandLine.
absl::Status ConfigureLoggingFromFlags(absl::string_view component);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_LOG_FLAGS_H_
