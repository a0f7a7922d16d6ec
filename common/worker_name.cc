#include "common/worker_name.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "common/status_macros.h"

namespace shardwise {

absl::Status CheckWorkerName(const std::string& field, const std::string& name) {
  if (name.size() > kMaxWorkerNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", name.size(), " characters; at most ", kMaxWorkerNameBytes, " are allowed"));
  }
  RETURN_IF_ERROR(CheckPrintableField(field, name, kMaxWorkerNameBytes));
  if (name.find_first_of(" \t=") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", ShownValue(name),
                                                   "' holds a space or '='; a worker's name may "
                                                   "hold neither"));
  }
  return absl::OkStatus();
}

absl::Status CheckWorkerNamePattern(const std::string& field, const std::string& pattern) {
  if (pattern.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": an empty pattern (a name, or a prefix ending in '*')"));
  }
  const size_t star = pattern.find('*');
  if (star != std::string::npos && star != pattern.size() - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", ShownValue(pattern),
                     "' has a '*' before its end (a name, or a prefix ending in '*')"));
  }
  const std::string prefix = pattern.substr(0, star);
  if (prefix.empty()) return absl::OkStatus();  // "*": any name
  return CheckWorkerName(field, prefix);
}

bool WorkerNameMatches(absl::string_view pattern, absl::string_view name) {
  if (absl::EndsWith(pattern, "*")) {
    return absl::StartsWith(name, pattern.substr(0, pattern.size() - 1));
  }
  return name == pattern;
}

bool WorkerNameMatchesAny(const std::vector<std::string>& patterns, absl::string_view name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& pattern) { return WorkerNameMatches(pattern, name); });
}

}  // namespace shardwise
