#ifndef SHARDWISE_COMMON_COORDINATOR_ADDRESS_H_
#define SHARDWISE_COMMON_COORDINATOR_ADDRESS_H_

#include <string>

namespace shardwise {

inline constexpr char kDefaultCoordinatorAddress[] = "127.0.0.1:7070";
inline constexpr char kCoordinatorEnvVar[] = "SHARDWISE_COORDINATOR";

// Where workers and the CLI find the coordinator: the --coordinator flag if given, else
// $SHARDWISE_COORDINATOR, else 127.0.0.1:7070.
std::string ResolveCoordinatorAddress(const std::string& flag_value);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_COORDINATOR_ADDRESS_H_
