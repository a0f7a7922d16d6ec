#include "common/safe_write.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

// Writes `path` and sets its modification time to `when`.
void WriteAt(const fs::path& path, absl::Time when) {
  std::ofstream(path) << "partial";
  const timespec times[2] = {absl::ToTimespec(when), absl::ToTimespec(when)};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

// A write killed before its rename left a temporary file; the next write of that name
// removes it once it has been left alone long enough. A write of the name still running
// (its file recently modified), other names' files and the target itself stay.
TEST(RemoveAbandonedWrites, RemovesOnlyOldTemporariesOfTheName) {
  const fs::path dir = fs::path(std::getenv("TEST_TMPDIR")) / "abandoned";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  WriteAt(dir / ".model.safetensors.tmp-00000000000000aa", now - absl::Hours(3));
  WriteAt(dir / ".model.safetensors.tmp-00000000000000bb", now - absl::Minutes(5));
  WriteAt(dir / ".other.safetensors.tmp-00000000000000cc", now - absl::Hours(3));
  WriteAt(dir / "model.safetensors", now - absl::Hours(3));
  EXPECT_EQ(RemoveAbandonedWrites(dir.string(), "model.safetensors", now), 1);
  EXPECT_FALSE(fs::exists(dir / ".model.safetensors.tmp-00000000000000aa"));
  EXPECT_TRUE(fs::exists(dir / ".model.safetensors.tmp-00000000000000bb"));
  EXPECT_TRUE(fs::exists(dir / ".other.safetensors.tmp-00000000000000cc"));
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  // WriteFileAtomically sweeps the name it writes (its clock: the real one).
  WriteAt(dir / ".other.safetensors.tmp-00000000000000dd", absl::Now() - absl::Hours(2));
  ASSERT_TRUE(WriteFileAtomically((dir / "other.safetensors").string(), "whole", true).ok());
  EXPECT_FALSE(fs::exists(dir / ".other.safetensors.tmp-00000000000000dd"));
  EXPECT_EQ(RemoveAbandonedWrites((dir / "missing").string(), "x", now), 0);
}

}  // namespace
}  // namespace shardwise
