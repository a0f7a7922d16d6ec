#include "common/untrusted_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/testing/out_of_descriptors.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

class UntrustedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshScratchFolder(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  fs::path dir_;
};

TEST_F(UntrustedFileTest, ReadsARegularFileWhole) {
  const std::string path = Write("plain", std::string("a\0b", 3));
  auto bytes = ReadUntrustedFile(path, 3, Links::kRefuse);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, std::string("a\0b", 3));
}

TEST_F(UntrustedFileTest, RefusesALinkOnlyWhenAskedTo) {
  const std::string target = Write("target", "secret");
  const std::string link = (dir_ / "link").string();
  fs::create_symlink(target, link);
  auto refused = ReadUntrustedFile(link, 1 << 20, Links::kRefuse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "'" + link + "' is a symbolic link"))
      << refused.status();
  auto followed = ReadUntrustedFile(link, 1 << 20, Links::kFollow);
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_EQ(*followed, "secret");
}

// Opening a FIFO plainly blocks until a writer comes: this test would hang.
TEST_F(UntrustedFileTest, RefusesAFifoWithoutBlocking) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (Links links : {Links::kRefuse, Links::kFollow}) {
    auto refused = ReadUntrustedFile(fifo, 1 << 20, links);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(refused.status().message(), "is not a regular file"))
        << refused.status();
  }
}

TEST_F(UntrustedFileTest, RefusesADeviceAndAFolder) {
  auto device = ReadUntrustedFile("/dev/zero", 1 << 20, Links::kFollow);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(device.status().message(), "a FIFO, a device or a socket"))
      << device.status();
  auto folder = ReadUntrustedFile(dir_.string(), 1 << 20, Links::kFollow);
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(folder.status().message(), "(a folder)")) << folder.status();
}

TEST_F(UntrustedFileTest, RefusesAFileOverTheLimitBeforeReadingIt) {
  const std::string path = Write("big", std::string(2049, 'x'));
  auto refused = ReadUntrustedFile(path, 2048, Links::kRefuse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "is 2049 bytes, over the limit of 2 KiB"))
      << refused.status();
  EXPECT_TRUE(ReadUntrustedFile(path, 2049, Links::kRefuse).ok());
}

TEST_F(UntrustedFileTest, AMissingFileIsNotFound) {
  auto missing = ReadUntrustedFile((dir_ / "absent").string(), 10, Links::kRefuse);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// A process out of file descriptors (EMFILE) cannot open the file now, which says
// nothing of the file: UNAVAILABLE (a job is not failed for good for it), not
// INVALID_ARGUMENT. In a child process whose descriptor limit is used up.
TEST_F(UntrustedFileTest, AHostThatCannotOpenNowIsUnavailable) {
  const std::string path = Write("plain", "bytes");
  EXPECT_EQ(testing::ExitCodeWithoutFileDescriptors([&] {
              const auto opened = ReadUntrustedFile(path, 10, Links::kRefuseAll);
              if (!absl::IsUnavailable(opened.status())) return 1;
              if (!absl::StrContains(opened.status().message(), "not the path")) return 2;
              return IsTransientFileError(EMFILE) && !IsTransientFileError(ENOENT) ? 0 : 3;
            }),
            0);
}

TEST_F(UntrustedFileTest, AFileCutShortWhileOpenIsDataLoss) {
  const std::string path = Write("shrinking", std::string(100, 'x'));
  auto file = UntrustedFile::Open(path, 100, Links::kRefuse);
  ASSERT_TRUE(file.ok()) << file.status();
  fs::resize_file(path, 10);
  auto bytes = file->ReadAll();
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
}

// A file in a subfolder of a folder a job names: a link at any component is refused, a
// FIFO does not block, and a path that would climb out is refused before anything opens.
TEST_F(UntrustedFileTest, OpensBeneathAFolderRefusingLinksAtEveryComponent) {
  fs::create_directories(dir_ / "step-1");
  Write("step-1/manifest.json", "{}");
  auto opened = UntrustedFile::OpenBeneath(dir_.string(), "step-1/manifest.json", 1 << 20);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened->ReadAll(), "{}");

  fs::create_directory_symlink(dir_ / "step-1", dir_ / "step-2");
  auto linked = UntrustedFile::OpenBeneath(dir_.string(), "step-2/manifest.json", 1 << 20);
  EXPECT_EQ(linked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(linked.status().message(), "step-2' is a symbolic link"))
      << linked.status();
  fs::create_symlink(dir_ / "step-1" / "manifest.json", dir_ / "step-1" / "linked.json");
  EXPECT_EQ(
      UntrustedFile::OpenBeneath(dir_.string(), "step-1/linked.json", 1 << 20).status().code(),
      absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(::mkfifo((dir_ / "step-1" / "fifo").c_str(), 0644), 0);
  EXPECT_EQ(UntrustedFile::OpenBeneath(dir_.string(), "step-1/fifo", 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  Write("plain", "x");
  const absl::Status not_a_folder =
      UntrustedFile::OpenBeneath(dir_.string(), "plain/manifest.json", 1 << 20).status();
  EXPECT_EQ(not_a_folder.code(), absl::StatusCode::kNotFound) << not_a_folder;
  EXPECT_EQ(UntrustedFile::OpenBeneath(dir_.string(), "../x", 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      UntrustedFile::OpenBeneath(dir_.string(), "step-1//manifest.json", 1 << 20).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// A canonical path (the path policy's output) is read with no link anywhere in it: a
// folder of it swapped for a link after the check is refused, where following it would
// read outside the folders the check allowed.
TEST_F(UntrustedFileTest, RefusesALinkAtAnyComponentOfACanonicalPath) {
  fs::create_directories(dir_ / "data");
  const std::string inside = Write("data/tokens.bin", "inside");
  const std::string canonical = fs::canonical(inside).string();
  auto read = ReadUntrustedFile(canonical, 1 << 20, Links::kRefuseAll);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "inside");

  fs::create_directories(dir_ / "elsewhere");
  Write("elsewhere/tokens.bin", "outside");
  fs::rename(dir_ / "data", dir_ / "data.old");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "data");
  const std::string folder = fs::path(canonical).parent_path().string();
  auto swapped = ReadUntrustedFile(canonical, 1 << 20, Links::kRefuseAll);
  EXPECT_EQ(swapped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(swapped.status().message(), "'" + folder + "' is a symbolic link"))
      << swapped.status();
  EXPECT_TRUE(absl::StrContains(swapped.status().message(), "put there since")) << swapped.status();
  // Only the last component is looked at otherwise: the link in the folder is followed.
  auto last_only = ReadUntrustedFile(canonical, 1 << 20, Links::kRefuse);
  ASSERT_TRUE(last_only.ok()) << last_only.status();
  EXPECT_EQ(*last_only, "outside");

  const std::string file_link = (fs::path(canonical).parent_path() / "link.bin").string();
  fs::create_symlink(canonical, file_link);
  EXPECT_EQ(ReadUntrustedFile(file_link, 1 << 20, Links::kRefuseAll).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const std::string& not_canonical :
       {std::string("relative/tokens.bin"), folder + "/../data/tokens.bin", folder + "//tokens.bin",
        std::string("/")}) {
    EXPECT_EQ(ReadUntrustedFile(not_canonical, 1 << 20, Links::kRefuseAll).status().code(),
              absl::StatusCode::kInvalidArgument)
        << not_canonical;
  }
}

// A folder a job names is listed as its files are read: with Links::kRefuseAll, not
// through a link anywhere in its path.
TEST_F(UntrustedFileTest, ListsAFolderRefusingLinksWhereAsked) {
  fs::create_directories(dir_ / "checkpoints" / "step-2");
  Write("checkpoints/b", "x");
  const std::string canonical = fs::canonical(dir_ / "checkpoints").string();
  auto names = ListFolder(canonical, Links::kRefuseAll);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"b", "step-2"}));

  fs::create_directory_symlink(dir_ / "checkpoints", dir_ / "linked");
  const std::string linked = (fs::path(canonical).parent_path() / "linked").string();
  auto refused = ListFolder(linked, Links::kRefuseAll);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "is a symbolic link"));
  EXPECT_TRUE(ListFolder(linked, Links::kFollow).ok());
  const absl::Status last = ListFolder(linked, Links::kRefuse).status();
  EXPECT_EQ(last.code(), absl::StatusCode::kInvalidArgument) << last;
  EXPECT_TRUE(absl::StrContains(last.message(), "is a symbolic link")) << last;
  EXPECT_EQ(ListFolder(canonical + "/missing", Links::kRefuseAll).status().code(),
            absl::StatusCode::kNotFound);
  for (Links links : {Links::kRefuseAll, Links::kFollow}) {
    const absl::Status file = ListFolder(canonical + "/b", links).status();
    EXPECT_EQ(file.code(), absl::StatusCode::kNotFound) << file;
    EXPECT_TRUE(absl::StrContains(file.message(), "is not a folder")) << file;
  }
}

TEST(ByteCountTest, PicksTheLargestExactUnit) {
  EXPECT_EQ(ByteCount(0), "0 bytes");
  EXPECT_EQ(ByteCount(1000), "1000 bytes");
  EXPECT_EQ(ByteCount(2048), "2 KiB");
  EXPECT_EQ(ByteCount(uint64_t{64} << 20), "64 MiB");
  EXPECT_EQ(ByteCount(uint64_t{3} << 30), "3 GiB");
}

}  // namespace
}  // namespace shardwise
