#include "tokenizer/durable_rename.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace shardwise {
namespace tokenizer {
namespace {

absl::Status Errno(const std::string& what) {
  // Out of space (or quota) is the storage's answer, not the path's.
  const int error = errno;
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == ENOSPC || error == EDQUOT) return absl::ResourceExhaustedError(message);
  return absl::PermissionDeniedError(message);
}

absl::Status Sync(const std::string& path, int flags, const std::string& what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Errno(absl::StrCat("opening ", what));
  absl::Status status = ::fsync(fd) == 0 ? absl::OkStatus() : Errno(absl::StrCat("syncing ", what));
  ::close(fd);
  return status;
}

}  // namespace

absl::Status SyncAndRename(const std::string& temporary, const std::string& path) {
  if (absl::Status synced = Sync(temporary, O_RDONLY, temporary); !synced.ok()) return synced;
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return Errno(absl::StrCat("renaming ", temporary, " to ", path));
  }
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  return Sync(folder, O_RDONLY | O_DIRECTORY, absl::StrCat("the folder of ", path));
}

}  // namespace tokenizer
}  // namespace shardwise
