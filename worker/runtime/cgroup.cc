#include "worker/runtime/cgroup.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardwise {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::optional<std::string> OwnCgroupFolder(absl::string_view proc_self_cgroup) {
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n')) {
    if (!absl::ConsumePrefix(&line, "0::")) continue;
    return line == "/" ? "" : std::string(line);
  }
  return std::nullopt;
}

std::string ReadOwnCgroupFile(const std::string& file) {
  const std::optional<std::string> folder = OwnCgroupFolder(ReadSmallFile("/proc/self/cgroup"));
  if (!folder.has_value()) return "";
  return ReadSmallFile(absl::StrCat("/sys/fs/cgroup", *folder, "/", file));
}

}  // namespace shardwise
