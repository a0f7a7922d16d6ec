#include "common/coordinator_address.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/printable_text.h"

namespace shardwise {
namespace {

// gRPC's target schemes (a resolver's name then ':'), as gRPC's own address strings use.
bool HasScheme(absl::string_view address) {
  static constexpr absl::string_view kSchemes[] = {
      "dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:"};
  for (absl::string_view scheme : kSchemes) {
    if (absl::StartsWith(address, scheme)) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckCoordinatorAddress(absl::string_view source, absl::string_view address) {
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": '", ShownValue(address), "' ", why, " (expected HOST:PORT)"));
  };
  if (address.empty()) return refuse("is empty");
  if (HasScheme(address)) return absl::OkStatus();
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return refuse("has no port");
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port_text = address.substr(colon + 1);
  if (host.empty()) return refuse("has no host");
  // An IPv6 address holds colons of its own: bracketed, its last colon is the port's.
  const bool bracketed = absl::StartsWith(host, "[");
  if (bracketed != absl::EndsWith(host, "]") || (!bracketed && absl::StrContains(host, ':'))) {
    return refuse("is not HOST:PORT (an IPv6 address goes in brackets: [::1]:7070)");
  }
  for (const char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return refuse("has a space or control character in its host");
    }
  }
  int port = 0;
  const bool digits =
      !port_text.empty() && port_text.find_first_not_of("0123456789") == absl::string_view::npos;
  if (!digits || port_text.size() > 5 || !absl::SimpleAtoi(port_text, &port) || port < 1 ||
      port > 65535) {
    return refuse(absl::StrCat("has port '", port_text, "', not one from 1 to 65535"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveCoordinatorAddress(const std::string& flag_value) {
  std::string source = "--coordinator";
  std::string address = flag_value;
  if (address.empty()) {
    const char* env = std::getenv(kCoordinatorEnvVar);
    if (env == nullptr || env[0] == '\0') return std::string(kDefaultCoordinatorAddress);
    source = absl::StrCat("$", kCoordinatorEnvVar);
    address = env;
  }
  if (absl::Status valid = CheckCoordinatorAddress(source, address); !valid.ok()) return valid;
  return address;
}

}  // namespace shardwise
