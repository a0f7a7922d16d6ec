#ifndef SHARDWISE_COMMON_UNTRUSTED_FILE_H_
#define SHARDWISE_COMMON_UNTRUSTED_FILE_H_

// Reading a file that someone else chose: every file a job names, and the files inside the
// folders it names (a tokenizer folder, a Hugging Face checkpoint). Whoever can write
// those folders decides what lies at each name, and the coordinator reads some of them on
// its call threads. So a read here
//   - never blocks: the file is opened with O_NONBLOCK, so a FIFO returns at once and is
//     then refused as not a regular file (a FIFO opened plainly blocks until a writer
//     comes);
//   - never runs on: only a regular file is read (a device such as /dev/zero never ends);
//   - is bounded: a file over the caller's limit is refused before a byte is read;
//   - with Links::kRefuse, never follows a link at the last component (O_NOFOLLOW): the
//     path policy (common/path_policy.h) checked the folder, not the names inside it, so
//     a link there could lead anywhere;
//   - with Links::kRefuseAll, never follows a link at any component: for a canonical path
//     (the path policy's output, all links resolved when it was checked), where a link
//     found at the opening was put there since the check, which could otherwise swap a
//     folder of the path for a link out of the allowed roots between check and open.
//     The path is walked from "/" one component at a time (O_NOFOLLOW, O_PATH: no read
//     permission needed on the folders walked through).
// Errors name the path and say what is wrong: NOT_FOUND (missing), PERMISSION_DENIED
// (unreadable), INVALID_ARGUMENT (a link, not a regular file, over the limit), and
// UNAVAILABLE for what this host's storage or process would answer otherwise later (an
// I/O error, a stale NFS handle, no file descriptor left: IsTransientFileError), which
// is not the path's fault and must not fail a job for good.
//
// Thread-safety: an UntrustedFile is used by one thread at a time; the functions are
// thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise {

enum class Links {
  kFollow,     // a path a person typed, or a mounted secret (Kubernetes mounts them by links)
  kRefuse,     // no link at the last component: a file inside a folder a job names
  kRefuseAll,  // no link at any component: a canonical path
};

// How the files inside a folder are read when the folder's path is read with `folder`:
// never through a link at their own name, nor anywhere when the folder's path is canonical.
Links InsideFolder(Links folder);

class UntrustedFile {
 public:
  // Opens `path` for reading as above; `max_bytes` bounds its size.
  static absl::StatusOr<UntrustedFile> Open(const std::string& path, uint64_t max_bytes,
                                            Links links);
  // Opens `relative` (names separated by '/', none of them ".." or empty) beneath the
  // folder `folder` (canonical, as the path policy leaves it), refusing a link at any
  // component of either (INVALID_ARGUMENT naming it): for files in the subfolders of a
  // folder a job names (a checkpoint's step folders). Each component is opened from the
  // one before, so a folder swapped for a link meanwhile is refused too.
  static absl::StatusOr<UntrustedFile> OpenBeneath(const std::string& folder,
                                                   const std::string& relative, uint64_t max_bytes);
  UntrustedFile(UntrustedFile&& other) noexcept;
  UntrustedFile& operator=(UntrustedFile&& other) noexcept;
  UntrustedFile(const UntrustedFile&) = delete;
  UntrustedFile& operator=(const UntrustedFile&) = delete;
  ~UntrustedFile();

  // Its size when it was opened.
  uint64_t size() const { return size_; }
  // Reads `count` bytes at `offset` into `out`; DATA_LOSS when the file ends before them
  // (it was cut short since it was opened).
  absl::Status ReadAt(uint64_t offset, uint64_t count, char* out) const;
  // As ReadAt, except that the file ending first is no error: the number of bytes read,
  // fewer than `count` only where it ends. DATA_LOSS on a failed read.
  absl::StatusOr<uint64_t> ReadUpTo(uint64_t offset, uint64_t count, char* out) const;
  // Its size() bytes.
  absl::StatusOr<std::string> ReadAll() const;

 private:
  UntrustedFile(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  // Opens the path of `names` (below "/") walking from "/" as Links::kRefuseAll does; a
  // link at `first_inside` or later is named as one inside a job's folder.
  static absl::StatusOr<UntrustedFile> OpenWithoutLinks(const std::vector<std::string>& names,
                                                        size_t first_inside, uint64_t max_bytes);
  // The file opened as `fd` (owned from here), checked: a regular file of at most
  // `max_bytes`.
  static absl::StatusOr<UntrustedFile> Checked(int fd, const std::string& path, uint64_t max_bytes,
                                               Links links);
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Whether `error` (an errno) says more about this host than about the path: the same
// open may succeed later or elsewhere (EIO, ESTALE, EMFILE, ENFILE, ENOMEM, ...).
bool IsTransientFileError(int error);

// The whole of a file, opened as UntrustedFile::Open does.
absl::StatusOr<std::string> ReadUntrustedFile(const std::string& path, uint64_t max_bytes,
                                              Links links);

// The names in `folder` ("." and ".." left out), sorted; the folder opened as `links`
// says (Links::kRefuseAll: walking from "/", no link anywhere). NOT_FOUND when it is
// missing or not a folder, INVALID_ARGUMENT naming a link where one is refused,
// DATA_LOSS when reading it fails part way (never a partial list).
absl::StatusOr<std::vector<std::string>> ListFolder(const std::string& folder, Links links);

// "N bytes" in the unit that reads best (B, KiB, MiB, GiB), for limits in messages.
std::string ByteCount(uint64_t bytes);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_UNTRUSTED_FILE_H_
