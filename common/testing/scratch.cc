#include "common/testing/scratch.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace shardwise::testing {

std::string ScratchRoot() {
  static const std::string* const root = [] {
    const char* bazel = std::getenv("TEST_TMPDIR");
    auto* path = new std::string(bazel != nullptr && *bazel != '\0'
                                     ? std::string(bazel)
                                     : "/tmp/shardwise-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(*path);
    return path;
  }();
  return *root;
}

std::string ScratchPath(std::string_view name) {
  return (std::filesystem::path(ScratchRoot()) / name).string();
}

std::string FreshScratchFolder(std::string_view name) {
  std::string path = ScratchPath(name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

}  // namespace shardwise::testing
