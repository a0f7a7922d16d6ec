#ifndef SHARDWISE_COMMON_HOST_PORT_H_
#define SHARDWISE_COMMON_HOST_PORT_H_

// "host:port" addresses, as flags and peers give them: an IPv6 host is written in
// brackets ("[::1]:9090").

#include <optional>
#include <string>

namespace shardwise {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

// The host and port of "host:port" or "[host]:port"; nullopt unless the host is not empty
// and the port is a number from 0 to 65535.
std::optional<HostPort> SplitHostPort(const std::string& address);

// "host:port", bracketing a host that has a colon (IPv6).
std::string JoinHostPort(const std::string& host, int port);

// Whether "host:port" (a listen address, or a gRPC target with a "dns:///" or "ipv4:"
// scheme) reaches only this machine: localhost, 127.0.0.0/8 or ::1.
bool IsLoopbackAddress(const std::string& address);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_HOST_PORT_H_
