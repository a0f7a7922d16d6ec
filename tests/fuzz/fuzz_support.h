#ifndef SHARDWISE_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define SHARDWISE_TESTS_FUZZ_FUZZ_SUPPORT_H_

// What the fuzz targets share: a scratch folder of their own, and a file holding the input
// for the readers that take paths.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace shardwise::fuzz {

// A folder for this process's scratch files (under $TEST_TMPDIR when set).
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* root = std::getenv("TEST_TMPDIR");
    std::string path = std::string(root != nullptr ? root : "/tmp") + "/shardwise-fuzz-" +
                       std::to_string(getpid());
    std::filesystem::create_directories(path);
    return path;
  }();
  return dir;
}

// Writes `size` bytes at `data` to ScratchDir()/name and returns the path.
inline std::string WriteScratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace shardwise::fuzz

#endif  // SHARDWISE_TESTS_FUZZ_FUZZ_SUPPORT_H_
