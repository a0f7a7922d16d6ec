#include "common/safe_write.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/time/clock.h"
#include "common/testing/permissions_apply.h"
#include "common/testing/scratch.h"
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

// An earlier attempt's identical output is left; a different one, or anything there that
// is not a regular file, is another's (ALREADY_EXISTS); one that cannot be read to compare
// is said as it is (here PERMISSION_DENIED, naming it), not refused as another's.
TEST(WriteFileUnlessSame, LeavesTheSameAndSaysWhyItCannotCompare) {
  const fs::path dir = testing::ScratchPath("unless-same");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "tokenizer.json").string();
  ASSERT_TRUE(WriteFileUnlessSame(path, "{}", /*replace=*/false).ok());
  EXPECT_TRUE(WriteFileUnlessSame(path, "{}", /*replace=*/false).ok());
  EXPECT_EQ(WriteFileUnlessSame(path, "[]", /*replace=*/false).code(),
            absl::StatusCode::kAlreadyExists);
  fs::permissions(path, fs::perms::none);
  const absl::Status unreadable = testing::AsReaderThatPermissionsKeepOut(
      [&] { return WriteFileUnlessSame(path, "{}", /*replace=*/false); });
  EXPECT_EQ(unreadable.code(), absl::StatusCode::kPermissionDenied) << unreadable;
  EXPECT_NE(unreadable.message().find(path), absl::string_view::npos) << unreadable;
}

// A write killed before its rename left a temporary file; the next write of that name
// removes it once it has been left alone long enough. A write of the name still running
// (its file recently modified), other names' files and the target itself stay.
TEST(RemoveAbandonedWrites, RemovesOnlyOldTemporariesOfTheName) {
  const fs::path dir = testing::FreshScratchFolder("abandoned");
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

// A file written a part at a time is there whole once the write returns, and not at all
// when its producer fails part way: the temporary file is gone too, and a file the write
// would have replaced is left as it was.
TEST(WriteFileAtomically, AStreamedWriteIsWholeOrAbsent) {
  const fs::path dir = testing::FreshScratchFolder("streamed");
  const std::string path = (dir / "shard").string();
  ASSERT_TRUE(WriteFileAtomically(
                  path,
                  [](FileAppender& file) {
                    for (absl::string_view part : {"one ", "two ", "three"}) {
                      if (absl::Status appended = file.Append(part); !appended.ok()) {
                        return appended;
                      }
                    }
                    return absl::OkStatus();
                  },
                  /*replace=*/false)
                  .ok());
  std::ifstream in(path);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
            "one two three");
  const absl::Status failed = WriteFileAtomically(
      path,
      [](FileAppender& file) {
        EXPECT_TRUE(file.Append("half of it").ok());
        return absl::UnavailableError("the device went away");
      },
      /*replace=*/true);
  EXPECT_EQ(failed, absl::UnavailableError("the device went away"));
  std::ifstream again(path);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()),
            "one two three");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

// A folder of files goes whole, out of sight at once (renamed first), and nothing is
// followed through a link: a link as the folder is refused, a link inside is unlinked,
// and what either points at stays. A removal cut short (here: a folder inside, which is
// not this function's to remove) leaves only the hidden name, which
// RemoveInterruptedRemovals clears once it can.
TEST(RemoveFolderOfFiles, RemovesTheFilesAndTheFolderNeverThroughALink) {
  const fs::path dir = testing::FreshScratchFolder("remove-folder");
  fs::create_directories(dir / "step");
  fs::create_directories(dir / "elsewhere");
  std::ofstream(dir / "elsewhere" / "kept") << "someone else's";
  std::ofstream(dir / "step" / "manifest.json") << "{}";
  std::ofstream(dir / "step" / "rank-00000.safetensors") << "shard";
  fs::create_symlink(dir / "elsewhere" / "kept", dir / "step" / "link");
  fs::create_directory_symlink(dir / "elsewhere", dir / "linked-step");

  const absl::Status linked = RemoveFolderOfFiles(dir.string(), "linked-step");
  EXPECT_EQ(linked.code(), absl::StatusCode::kPermissionDenied) << linked;
  EXPECT_TRUE(fs::exists(dir / "elsewhere" / "kept"));
  for (const char* name : {"", ".", "..", "elsewhere/kept"}) {
    EXPECT_EQ(RemoveFolderOfFiles(dir.string(), name).code(), absl::StatusCode::kInvalidArgument)
        << name;
  }

  EXPECT_TRUE(RemoveFolderOfFiles(dir.string(), "step").ok());
  EXPECT_FALSE(fs::exists(dir / "step"));
  EXPECT_FALSE(fs::exists(dir / ".step.removing"));
  EXPECT_TRUE(fs::exists(dir / "elsewhere" / "kept"));
  EXPECT_EQ(RemoveFolderOfFiles(dir.string(), "step").code(), absl::StatusCode::kNotFound);

  fs::create_directories(dir / "nested" / "inner");
  std::ofstream(dir / "nested" / "manifest.json") << "{}";
  const absl::Status nested = RemoveFolderOfFiles(dir.string(), "nested");
  EXPECT_EQ(nested.code(), absl::StatusCode::kFailedPrecondition) << nested;
  EXPECT_FALSE(fs::exists(dir / "nested"));
  EXPECT_TRUE(fs::exists(dir / ".nested.removing" / "inner"));
  fs::create_directory_symlink(dir / "elsewhere", dir / ".nest-link.removing");
  std::ofstream(dir / ".other.removing") << "another prefix: not ours";
  EXPECT_EQ(RemoveInterruptedRemovals(dir.string(), "nest").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(dir / ".nest-link.removing"));  // gone past the error, unfollowed
  fs::remove(dir / ".nested.removing" / "inner");
  EXPECT_TRUE(RemoveInterruptedRemovals(dir.string(), "nest").ok());
  EXPECT_FALSE(fs::exists(dir / ".nested.removing"));
  EXPECT_TRUE(fs::exists(dir / ".other.removing"));
  EXPECT_TRUE(fs::exists(dir / "elsewhere" / "kept"));
}

TEST(RemoveFiles, RemovesTheNamesThereNeverThroughALink) {
  const fs::path dir = testing::FreshScratchFolder("remove-files");
  fs::create_directories(dir / "elsewhere");
  fs::create_directories(dir / "out" / "a-folder");
  std::ofstream(dir / "elsewhere" / "kept") << "someone else's";
  std::ofstream(dir / "out" / "config.json") << "{}";
  std::ofstream(dir / "out" / "untouched.json") << "{}";
  fs::create_symlink(dir / "elsewhere" / "kept", dir / "out" / "tokenizer.json");
  fs::create_directory_symlink(dir / "elsewhere", dir / "linked-out");

  // Absent names are no error; a link is unlinked, its target kept; other files stay.
  EXPECT_TRUE(
      RemoveFiles((dir / "out").string(), {"config.json", "tokenizer.json", "absent"}).ok());
  EXPECT_FALSE(fs::exists(dir / "out" / "config.json"));
  EXPECT_FALSE(fs::is_symlink(dir / "out" / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(dir / "elsewhere" / "kept"));
  EXPECT_TRUE(fs::exists(dir / "out" / "untouched.json"));

  // A folder reached through a link, a name with a path in it, a folder among the names.
  EXPECT_EQ(RemoveFiles((dir / "linked-out").string(), {"kept"}).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(fs::exists(dir / "elsewhere" / "kept"));
  for (const char* name : {"", ".", "..", "../elsewhere/kept"}) {
    EXPECT_EQ(RemoveFiles((dir / "out").string(), {"untouched.json", name}).code(),
              absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_TRUE(fs::exists(dir / "out" / "untouched.json")) << name;
  }
  EXPECT_EQ(RemoveFiles((dir / "out").string(), {"a-folder"}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(dir / "out" / "a-folder"));
  EXPECT_TRUE(fs::exists(dir / "elsewhere" / "kept"));
}

}  // namespace
}  // namespace shardwise
