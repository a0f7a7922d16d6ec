#include "common/safe_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/untrusted_file.h"

namespace shardwise {
namespace {

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status Errno(const std::string& what) {
  const int error = errno;
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == EACCES || error == EPERM || error == ELOOP || error == ENOTDIR) {
    return absl::PermissionDeniedError(message);
  }
  // Not UNAVAILABLE for EIO, as a read's: a fault-tolerant rank takes UNAVAILABLE for a
  // lost peer and would wait for a membership change that never comes.
  if (error == ENOSPC || error == EDQUOT || error == EIO)
    return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// Opens folder `path` from the root, one component at a time, refusing links; with
// `create`, makes the components that are missing.
absl::Status OpenFolder(const std::string& path, bool create, Fd* out) {
  std::filesystem::path folder(path);
  if (!folder.is_absolute())
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not absolute"));
  Fd fd(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("opening /");
  std::string walked;
  for (const auto& part : folder.relative_path()) {
    const std::string name = part.string();
    if (name.empty() || name == ".") continue;
    walked += "/" + name;
    if (create && ::mkdirat(fd.get(), name.c_str(), 0755) == 0) {
      // The new folder's entry is durable once its parent is synced.
      if (::fsync(fd.get()) != 0)
        return Errno(absl::StrCat("syncing the folder of '", walked, "'"));
    } else if (create && errno != EEXIST) {
      return Errno(absl::StrCat("creating '", walked, "'"));
    }
    Fd next(::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      if (errno == ELOOP || errno == ENOTDIR) {
        return absl::PermissionDeniedError(
            absl::StrCat("'", walked,
                         "' is a symlink or not a folder; outputs are never written through "
                         "links"));
      }
      return Errno(absl::StrCat("opening '", walked, "'"));
    }
    fd = std::move(next);
  }
  *out = std::move(fd);
  return absl::OkStatus();
}

// A rename or link is durable (survives a crash of the node) once the folder holding
// the new entry is synced: without it, a file reported written, a checkpoint's manifest
// or a final model, could be gone after a power loss.
absl::Status SyncFolder(const Fd& folder, const std::string& path) {
  if (::fsync(folder.get()) == 0) return absl::OkStatus();
  return Errno(absl::StrCat("syncing the folder of '", path, "'"));
}

// The names in the folder open as `folder` ("." and ".." left out).
absl::StatusOr<std::vector<std::string>> NamesIn(const Fd& folder, const std::string& path) {
  const int listing = ::dup(folder.get());
  DIR* entries = listing >= 0 ? ::fdopendir(listing) : nullptr;
  if (entries == nullptr) {
    const absl::Status error = Errno(absl::StrCat("listing '", path, "'"));
    if (listing >= 0) ::close(listing);
    return error;
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;  // readdir's end and its failure differ only in errno
    const dirent* entry = ::readdir(entries);
    if (entry == nullptr) break;
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const absl::Status failed =
      errno != 0 ? Errno(absl::StrCat("listing '", path, "'")) : absl::OkStatus();
  ::closedir(entries);
  if (!failed.ok()) return failed;
  return names;
}

}  // namespace

absl::Status CreateFolders(const std::string& folder) {
  Fd fd;
  return OpenFolder(folder, /*create=*/true, &fd);
}

int RemoveAbandonedWrites(const std::string& folder_path, const std::string& name, absl::Time now) {
  Fd folder;
  if (!OpenFolder(folder_path, /*create=*/false, &folder).ok()) return 0;
  // A listing that fails removes nothing now; the next write to this name tries again.
  const absl::StatusOr<std::vector<std::string>> names = NamesIn(folder, folder_path);
  if (!names.ok()) return 0;
  const std::string prefix = absl::StrCat(".", name, ".tmp-");
  int removed = 0;
  for (const std::string& candidate : *names) {
    if (!absl::StartsWith(candidate, prefix)) continue;
    struct stat info;
    if (::fstatat(folder.get(), candidate.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(info.st_mode) || absl::FromTimeT(info.st_mtime) + kAbandonedWriteAge > now) {
      continue;
    }
    removed += ::unlinkat(folder.get(), candidate.c_str(), 0) == 0 ? 1 : 0;
  }
  return removed;
}

namespace {

class DescriptorAppender : public FileAppender {
 public:
  DescriptorAppender(int fd, const std::string& path) : fd_(fd), path_(path) {}
  absl::Status Append(absl::string_view bytes) override {
    for (size_t written = 0; written < bytes.size();) {
      const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Errno(absl::StrCat("writing '", path_, "'"));
      written += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

 private:
  const int fd_;
  const std::string& path_;
};

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents,
                                 bool replace) {
  return WriteFileAtomically(
      path, [&](FileAppender& file) { return file.Append(contents); }, replace);
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::FunctionRef<absl::Status(FileAppender&)> produce,
                                 bool replace) {
  const std::filesystem::path target(path);
  const std::string name = target.filename().string();
  Fd folder;
  if (absl::Status opened = OpenFolder(target.parent_path().string(), false, &folder);
      !opened.ok()) {
    return opened;
  }
  RemoveAbandonedWrites(target.parent_path().string(), name, absl::Now());
  absl::BitGen random;
  const std::string temporary =
      absl::StrFormat(".%s.tmp-%016x", name, absl::Uniform<uint64_t>(random));
  Fd file(::openat(folder.get(), temporary.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (file.get() < 0) return Errno(absl::StrCat("creating a temporary file beside '", path, "'"));
  auto discard = [&](absl::Status status) {
    ::unlinkat(folder.get(), temporary.c_str(), 0);
    return status;
  };
  DescriptorAppender appender(file.get(), path);
  if (absl::Status produced = produce(appender); !produced.ok()) return discard(produced);
  if (::fsync(file.get()) != 0) return discard(Errno(absl::StrCat("syncing '", path, "'")));
  if (replace) {
    if (::renameat(folder.get(), temporary.c_str(), folder.get(), name.c_str()) != 0) {
      return discard(Errno(absl::StrCat("renaming into '", path, "'")));
    }
    return SyncFolder(folder, path);
  }
  // No replacing: an atomic rename that fails if `path` exists, or, on file systems
  // without it, a hard link, which fails the same way.
  if (::renameat2(folder.get(), temporary.c_str(), folder.get(), name.c_str(), RENAME_NOREPLACE) ==
      0) {
    return SyncFolder(folder, path);
  }
  if (errno == EINVAL || errno == ENOSYS) {
    if (::linkat(folder.get(), temporary.c_str(), folder.get(), name.c_str(), 0) == 0) {
      return discard(SyncFolder(folder, path));
    }
  }
  if (errno == EEXIST) {
    return discard(absl::AlreadyExistsError(
        absl::StrCat("'", path,
                     "' exists already; a job never replaces a file it did not create unless "
                     "its spec says output.overwrite: true")));
  }
  return discard(Errno(absl::StrCat("renaming into '", path, "'")));
}

namespace {

// Unlinks `name` in `folder` (`path` names the folder in errors); a folder there is
// FAILED_PRECONDITION.
absl::Status UnlinkFile(const Fd& folder, const std::string& path, const std::string& name) {
  if (::unlinkat(folder.get(), name.c_str(), 0) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno == EISDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", path, "/", name, "' is a folder; only files are removed here"));
  }
  return Errno(absl::StrCat("removing '", path, "/", name, "'"));
}

constexpr char kRemovingSuffix[] = ".removing";

// Removes the files of `name` in `parent` (the folder `parent_path`), then `name` itself.
// What is gone already (another process clearing the same removal) is no error.
absl::Status RemoveFilesAndFolder(const Fd& parent, const std::string& parent_path,
                                  const std::string& name) {
  const std::string path = absl::StrCat(parent_path, "/", name);
  Fd folder(::openat(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (folder.get() < 0 && errno == ENOENT) return absl::OkStatus();
  if (folder.get() < 0) return Errno(absl::StrCat("opening '", path, "'"));
  absl::StatusOr<std::vector<std::string>> names = NamesIn(folder, path);
  if (!names.ok()) return names.status();
  for (const std::string& file : *names) {
    if (absl::Status removed = UnlinkFile(folder, path, file); !removed.ok()) return removed;
  }
  if (::unlinkat(parent.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return Errno(absl::StrCat("removing '", path, "'"));
  }
  return SyncFolder(parent, path);
}

}  // namespace

namespace {

bool IsPlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

absl::Status RemoveFiles(const std::string& folder_path, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (!IsPlainName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "' is not the name of a file in '", folder_path, "'"));
    }
  }
  Fd folder;
  if (absl::Status opened = OpenFolder(folder_path, /*create=*/false, &folder); !opened.ok()) {
    return opened;
  }
  for (const std::string& name : names) {
    if (absl::Status removed = UnlinkFile(folder, folder_path, name); !removed.ok()) {
      return removed;
    }
  }
  return SyncFolder(folder, folder_path);
}

absl::Status RemoveFolderOfFiles(const std::string& folder_path, const std::string& name) {
  if (!IsPlainName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not the name of a folder in '", folder_path, "'"));
  }
  Fd parent;
  if (absl::Status opened = OpenFolder(folder_path, /*create=*/false, &parent); !opened.ok()) {
    return opened;
  }
  const std::string path = absl::StrCat(folder_path, "/", name);
  struct stat info;
  if (::fstatat(parent.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("'", path, "' is not there"));
    return Errno(absl::StrCat("looking at '", path, "'"));
  }
  if (!S_ISDIR(info.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path, "' is a symlink or not a folder; nothing is removed through it"));
  }
  const std::string hidden = absl::StrCat(".", name, kRemovingSuffix);
  if (::renameat(parent.get(), name.c_str(), parent.get(), hidden.c_str()) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("'", path, "' is not there"));
    return Errno(absl::StrCat("renaming '", path, "' out of sight"));
  }
  if (absl::Status synced = SyncFolder(parent, path); !synced.ok()) return synced;
  return RemoveFilesAndFolder(parent, folder_path, hidden);
}

absl::Status RemoveInterruptedRemovals(const std::string& folder_path, const std::string& prefix) {
  Fd parent;
  if (absl::Status opened = OpenFolder(folder_path, /*create=*/false, &parent); !opened.ok()) {
    return opened;
  }
  const absl::StatusOr<std::vector<std::string>> names = NamesIn(parent, folder_path);
  if (!names.ok()) return names.status();
  const std::string start = absl::StrCat(".", prefix);
  absl::Status first_error;
  for (const std::string& name : *names) {
    if (name.size() <= start.size() + sizeof(kRemovingSuffix) - 1 ||
        !absl::StartsWith(name, start) || !absl::EndsWith(name, kRemovingSuffix)) {
      continue;
    }
    // A link or file renamed there (swapped in before the rename) is unlinked, not followed.
    struct stat info;
    const bool folder = ::fstatat(parent.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
                        S_ISDIR(info.st_mode);
    absl::Status removed = folder ? RemoveFilesAndFolder(parent, folder_path, name)
                                  : UnlinkFile(parent, folder_path, name);
    if (first_error.ok()) first_error = removed;
  }
  return first_error;
}

absl::Status WriteFileUnlessSame(const std::string& path, const std::string& contents,
                                 bool replace) {
  if (!replace) {
    // Read as an untrusted file (no link, a regular file, at most as long as `contents`):
    // anything else there is not this job's and is refused below.
    const absl::StatusOr<std::string> existing =
        ReadUntrustedFile(path, contents.size(), Links::kRefuse);
    if (existing.ok() && *existing == contents) return absl::OkStatus();
    // A file that could not be read (an I/O error, a stale handle: UNAVAILABLE; no
    // permission) may be the same: said as it is, not refused as another's.
    if (!existing.ok() && !absl::IsNotFound(existing.status()) &&
        !absl::IsInvalidArgument(existing.status())) {
      return existing.status();
    }
  }
  return WriteFileAtomically(path, contents, replace);
}

}  // namespace shardwise
