#include "server/state_file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace shardwise {
namespace {

// The file `name` stands for, with every symlink on the way resolved, also when the file
// itself does not exist yet (a first start through a link): the lock belongs to the file,
// whatever name reaches it, so a coordinator given a symlink and one given its target
// cannot both run on it.
std::string ResolveLinks(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path path = name;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(path, error)); ++hops) {
    const fs::path target = fs::read_symlink(path, error);
    if (error) break;
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
  const fs::path resolved = fs::weakly_canonical(path, error);
  return error ? path.string() : resolved.string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateFileLock>> StateFileLock::Acquire(
    const std::string& state_file) {
  const std::string path = ResolveLinks(state_file) + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create the lock file '", path, "': ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    const std::string pid = n > 0 ? std::string(absl::StripAsciiWhitespace(holder)) : "unknown";
    return absl::FailedPreconditionError(
        absl::StrCat("the state file '", state_file, "' is in use by another coordinator (pid ",
                     pid, ", holding '", path, "'); one coordinator per state file"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds all the same; only the message a second coordinator shows suffers.
  }
  return std::unique_ptr<StateFileLock>(new StateFileLock(fd));
}

StateFileLock::~StateFileLock() { ::close(fd_); }

}  // namespace shardwise
