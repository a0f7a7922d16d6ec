#ifndef SHARDWISE_COMMON_COORDINATOR_ADDRESS_H_
#define SHARDWISE_COMMON_COORDINATOR_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {

inline constexpr char kDefaultCoordinatorAddress[] = "127.0.0.1:7070";
inline constexpr char kCoordinatorEnvVar[] = "SHARDWISE_COORDINATOR";

// Where workers and the CLI find the coordinator: the --coordinator flag if given, else
// $SHARDWISE_COORDINATOR, else 127.0.0.1:7070; INVALID_ARGUMENT naming whichever gave
// an address CheckCoordinatorAddress refuses.
absl::StatusOr<std::string> ResolveCoordinatorAddress(const std::string& flag_value);

// OK for HOST:PORT (a name, an IPv4 address or a bracketed IPv6 one, and a port from 1
// to 65535) or a gRPC target with a scheme (dns:, ipv4:, ipv6:, unix:, ...), which gRPC
// checks itself; otherwise INVALID_ARGUMENT "`source`: what is wrong". gRPC would read a
// port past 65535 modulo 65536 and dial port 0 for an address without one: another
// server, or none, and an error naming neither.
absl::Status CheckCoordinatorAddress(absl::string_view source, absl::string_view address);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_COORDINATOR_ADDRESS_H_
