#include "common/untrusted_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace shardwise {
namespace {

// Where a refused link was found, which says how it came to be there.
enum class LinkAt {
  kInsideFolder,   // a name inside a folder a job names: never checked
  kCheckedFolder,  // a folder of a checked path: its links were resolved at the check
  kLast,           // the last name of a path opened with Links::kRefuseAll
};

absl::Status LinkRefused(const std::string& path, LinkAt at) {
  switch (at) {
    case LinkAt::kInsideFolder:
      return absl::InvalidArgumentError(
          absl::StrCat("'", path,
                       "' is a symbolic link; the files of a folder a job names are read as "
                       "they are, never through a link"));
    case LinkAt::kCheckedFolder:
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path,
          "' is a symbolic link; a job's paths are read as they were checked, with no link in "
          "them, so this one was put there since"));
    case LinkAt::kLast:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", path,
      "' is a symbolic link; a job's files are read as they are, never through a link (a path "
      "the spec names was checked with its links resolved, so a link there was put there "
      "since; a file in a folder the job names must be the file itself)"));
}

absl::Status OpenError(const std::string& path, int error, Links links) {
  if (IsTransientFileError(error)) {
    return absl::UnavailableError(absl::StrCat("'", path,
                                               "' cannot be opened now: ", std::strerror(error),
                                               " (this host's storage or process, not the path)"));
  }
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(absl::StrCat("'", path, "' does not exist"));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(absl::StrCat(
          "'", path, "' cannot be read: its permissions, or a folder's, keep this process out"));
    case ELOOP:
      if (links == Links::kRefuse) return LinkRefused(path, LinkAt::kInsideFolder);
      if (links == Links::kRefuseAll) return LinkRefused(path, LinkAt::kLast);
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", path, "' cannot be opened: ", std::strerror(error)));
}

// The names of `path` below "/" (`path` absolute, every name plain); empty when it is
// "/" itself.
absl::StatusOr<std::vector<std::string>> PlainNames(const std::string& path,
                                                    const std::string& shown) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("'", shown, "' is not an absolute path"));
  }
  std::vector<std::string> names;
  if (path == "/") return names;
  names = absl::StrSplit(path.substr(1), '/');
  for (const std::string& name : names) {
    if (name.empty() || name == "." || name == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("'", shown, "' is not a canonical path (an empty, '.' or '..' name)"));
    }
  }
  return names;
}

// Opens the path of `names` (below "/", at least one) walking from "/": every folder with
// O_PATH (search permission is enough) and O_NOFOLLOW, the last name with `last_flags`
// and O_NOFOLLOW, each opened from the one before, so that a link anywhere is refused,
// named as one inside a job's folder from `first_inside` on. `*fd` is the last's.
absl::Status OpenWalking(const std::vector<std::string>& names, size_t first_inside, int last_flags,
                         int* out) {
  int fd = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return OpenError("/", errno, Links::kRefuseAll);
  std::string walked;
  for (size_t i = 0; i < names.size(); ++i) {
    walked = absl::StrCat(walked, "/", names[i]);
    const bool last = i + 1 == names.size();
    const int flags = O_CLOEXEC | O_NOFOLLOW | (last ? last_flags : O_PATH | O_DIRECTORY);
    const int next = ::openat(fd, names[i].c_str(), flags);
    const int error = errno;
    // A folder component that is a link fails with ENOTDIR (O_DIRECTORY), not ELOOP.
    struct stat info;
    const bool link = next < 0 && (error == ELOOP || error == ENOTDIR) &&
                      ::fstatat(fd, names[i].c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
                      S_ISLNK(info.st_mode);
    ::close(fd);
    if (link) {
      return LinkRefused(walked, i >= first_inside ? LinkAt::kInsideFolder
                                 : last            ? LinkAt::kLast
                                                   : LinkAt::kCheckedFolder);
    }
    if (next < 0) return OpenError(walked, error, Links::kRefuseAll);
    fd = next;
  }
  *out = fd;
  return absl::OkStatus();
}

}  // namespace

std::string ByteCount(uint64_t bytes) {
  constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (unit < 3 && bytes >= (uint64_t{1} << (10 * (unit + 1))) &&
         bytes % (uint64_t{1} << (10 * (unit + 1))) == 0) {
    ++unit;
  }
  return absl::StrCat(bytes >> (10 * unit), " ", kUnits[unit]);
}

Links InsideFolder(Links folder) {
  return folder == Links::kRefuseAll ? Links::kRefuseAll : Links::kRefuse;
}

absl::StatusOr<UntrustedFile> UntrustedFile::Open(const std::string& path, uint64_t max_bytes,
                                                  Links links) {
  if (links == Links::kRefuseAll) {
    const absl::StatusOr<std::vector<std::string>> names = PlainNames(path, path);
    if (!names.ok()) return names.status();
    return OpenWithoutLinks(*names, names->size(), max_bytes);
  }
  const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (links == Links::kRefuse ? O_NOFOLLOW : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return OpenError(path, errno, links);
  return Checked(fd, path, max_bytes, links);
}

absl::StatusOr<UntrustedFile> UntrustedFile::OpenBeneath(const std::string& folder,
                                                         const std::string& relative,
                                                         uint64_t max_bytes) {
  // "/" + relative: absolute, so that a relative starting with '/' shows as an empty name.
  const absl::StatusOr<std::vector<std::string>> inside = PlainNames("/" + relative, relative);
  if (!inside.ok() || inside->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", relative, "' is not a plain path beneath '", folder, "'"));
  }
  absl::StatusOr<std::vector<std::string>> names = PlainNames(folder, folder);
  if (!names.ok()) return names.status();
  const size_t first_inside = names->size();
  names->insert(names->end(), inside->begin(), inside->end());
  return OpenWithoutLinks(*names, first_inside, max_bytes);
}

absl::StatusOr<UntrustedFile> UntrustedFile::OpenWithoutLinks(const std::vector<std::string>& names,
                                                              size_t first_inside,
                                                              uint64_t max_bytes) {
  if (names.empty()) return absl::InvalidArgumentError("'/' is not a regular file (a folder)");
  int fd = -1;
  const absl::Status opened = OpenWalking(names, first_inside, O_RDONLY | O_NONBLOCK, &fd);
  if (!opened.ok()) return opened;
  return Checked(fd, absl::StrCat("/", absl::StrJoin(names, "/")), max_bytes, Links::kRefuseAll);
}

absl::StatusOr<UntrustedFile> UntrustedFile::Checked(int fd, const std::string& path,
                                                     uint64_t max_bytes, Links links) {
  UntrustedFile file(fd, 0, path);
  struct stat info;
  if (::fstat(fd, &info) != 0) return OpenError(path, errno, links);
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a regular file (",
                     S_ISDIR(info.st_mode) ? "a folder" : "a FIFO, a device or a socket", ")"));
  }
  file.size_ = static_cast<uint64_t>(info.st_size);
  if (file.size_ > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is ", file.size_,
                                                   " bytes, over the limit of ",
                                                   ByteCount(max_bytes), " for this file"));
  }
  return file;
}

UntrustedFile::UntrustedFile(UntrustedFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

UntrustedFile& UntrustedFile::operator=(UntrustedFile&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(size_, other.size_);
  std::swap(path_, other.path_);
  return *this;
}

UntrustedFile::~UntrustedFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<uint64_t> UntrustedFile::ReadUpTo(uint64_t offset, uint64_t count, char* out) const {
  uint64_t done = 0;
  while (done < count) {
    const ssize_t n = ::pread(fd_, out + done, count - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // This host's trouble (an I/O error, a stale handle) is not the file's damage.
      const int error = errno;
      return absl::Status(IsTransientFileError(error) ? absl::StatusCode::kUnavailable
                                                      : absl::StatusCode::kDataLoss,
                          absl::StrCat("'", path_, "': ", std::strerror(error)));
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  return done;
}

absl::Status UntrustedFile::ReadAt(uint64_t offset, uint64_t count, char* out) const {
  const absl::StatusOr<uint64_t> done = ReadUpTo(offset, count, out);
  if (!done.ok()) return done.status();
  if (*done == count) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("'", path_, "' ended at byte ", offset + *done,
                                          ": it changed while being read"));
}

absl::StatusOr<std::string> UntrustedFile::ReadAll() const {
  std::string bytes(size_, '\0');
  if (absl::Status read = ReadAt(0, size_, bytes.data()); !read.ok()) return read;
  return bytes;
}

namespace {

// Opens `folder` for listing as `links` says; on failure, says what it is instead where
// that is clearer than errno: a link where one is refused, a file where a folder is
// wanted.
absl::Status OpenFolder(const std::string& folder, Links links, int* fd) {
  absl::Status opened;
  if (links == Links::kRefuseAll && folder != "/") {
    const absl::StatusOr<std::vector<std::string>> names = PlainNames(folder, folder);
    if (!names.ok()) return names.status();
    opened = OpenWalking(*names, names->size(), O_RDONLY | O_DIRECTORY, fd);
  } else {
    *fd = ::open(folder.c_str(),
                 O_RDONLY | O_DIRECTORY | O_CLOEXEC | (links == Links::kRefuse ? O_NOFOLLOW : 0));
    if (*fd < 0) opened = OpenError(folder, errno, links);
  }
  struct stat info;
  if (!opened.ok() && ::lstat(folder.c_str(), &info) == 0) {
    if (S_ISLNK(info.st_mode) && links == Links::kRefuse) {
      return LinkRefused(folder, LinkAt::kInsideFolder);
    }
    if (!S_ISLNK(info.st_mode) && !S_ISDIR(info.st_mode)) {
      return absl::NotFoundError(absl::StrCat("'", folder, "' is not a folder"));
    }
  }
  return opened;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListFolder(const std::string& folder, Links links) {
  int fd = -1;
  if (absl::Status opened = OpenFolder(folder, links, &fd); !opened.ok()) return opened;
  DIR* listing = ::fdopendir(fd);  // owns fd from here
  if (listing == nullptr) {
    const int error = errno;
    ::close(fd);
    return OpenError(folder, error, links);
  }
  std::vector<std::string> names;
  while (true) {
    errno = 0;  // readdir's end and its failure both return null; errno tells them apart
    const struct dirent* entry = ::readdir(listing);
    if (entry == nullptr) break;
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const int error = errno;
  ::closedir(listing);
  if (error != 0) {
    return absl::Status(
        IsTransientFileError(error) ? absl::StatusCode::kUnavailable : absl::StatusCode::kDataLoss,
        absl::StrCat("'", folder, "' could not be listed: ", std::strerror(error)));
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool IsTransientFileError(int error) {
  switch (error) {
    case EIO:
    case ESTALE:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EINTR:
    case EAGAIN:
    case EBUSY:
    case ENOBUFS:
    case ETIMEDOUT:
    case ENOLINK:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ENETDOWN:
    case ENETUNREACH:
    case ECONNRESET:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::string> ReadUntrustedFile(const std::string& path, uint64_t max_bytes,
                                              Links links) {
  absl::StatusOr<UntrustedFile> file = UntrustedFile::Open(path, max_bytes, links);
  if (!file.ok()) return file.status();
  return file->ReadAll();
}

}  // namespace shardwise
