#include "common/host_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace shardwise {

std::optional<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort split;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &split.port) || split.port < 0 ||
      split.port > 65535) {
    return std::nullopt;
  }
  split.host = address.substr(0, colon);
  if (split.host.size() > 2 && split.host.front() == '[' && split.host.back() == ']') {
    split.host = split.host.substr(1, split.host.size() - 2);
  }
  return split;
}

std::string JoinHostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

bool IsLoopbackAddress(const std::string& address) {
  absl::string_view target = address;
  for (absl::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&target, scheme)) break;
  }
  // One address: gRPC's ipv4:/ipv6: schemes take a list, which could name others.
  if (absl::StrContains(target, ',')) return false;
  // As gRPC reads a target: a port only after the one colon, or after "[host]"; an
  // unbracketed address of several colons is a host (IPv6) with no port.
  const size_t colons = std::count(target.begin(), target.end(), ':');
  const bool has_port = colons == 1 || absl::StartsWith(target, "[");
  const std::optional<HostPort> split =
      has_port ? SplitHostPort(std::string(target)) : std::nullopt;
  const std::string host = split.has_value() ? split->host : std::string(target);
  if (host == "localhost") return true;
  // Numeric only: a name such as "127.example.com" is no loopback address.
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace shardwise
