#include "common/coordinator_address.h"

#include <cstdlib>

namespace shardwise {

std::string ResolveCoordinatorAddress(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv(kCoordinatorEnvVar);
  if (env != nullptr && env[0] != '\0') return env;
  return kDefaultCoordinatorAddress;
}

}  // namespace shardwise
