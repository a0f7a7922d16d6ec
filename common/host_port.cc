#include "common/host_port.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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

}  // namespace shardwise
