#include "worker/runtime/cgroup.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace shardwise {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string ReadOwnCgroupFile(const std::string& file) {
  // "0::/PATH" for the unified hierarchy.
  const std::string membership = ReadSmallFile("/proc/self/cgroup");
  const size_t at = membership.find("0::");
  if (at == std::string::npos) return "";
  std::string path = membership.substr(at + 3);
  path = path.substr(0, path.find('\n'));
  return ReadSmallFile(absl::StrCat("/sys/fs/cgroup", path == "/" ? "" : path, "/", file));
}

}  // namespace shardwise
