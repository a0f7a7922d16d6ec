#ifndef SHARDWISE_COMMON_SAFE_WRITE_H_
#define SHARDWISE_COMMON_SAFE_WRITE_H_

// Writing a job's outputs without following a link planted in the way and without
// replacing a file the job did not create. Paths are canonical (common/path_policy.h:
// no symlink in them when they were checked); each folder is opened component by
// component with O_NOFOLLOW, so a link put there since is refused, not followed.

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace shardwise {

// Creates `folder` and its missing parents, never through a symlink: PERMISSION_DENIED
// naming the component that is a link or not a folder.
absl::Status CreateFolders(const std::string& folder);

// Writes `contents` to `path` whole or not at all: into a temporary file created
// exclusively (O_EXCL, O_NOFOLLOW) in the same folder, synced, then renamed into place
// and the folder synced, so that the file is there after a crash of the node once this
// returns OK. (CreateFolders syncs each folder it creates into its parent, too.)
// An existing `path` is replaced only if `replace`; otherwise ALREADY_EXISTS and nothing
// is written.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents,
                                 bool replace);

// Where a streamed write's bytes go (WriteFileAtomically's `produce`).
class FileAppender {
 public:
  virtual ~FileAppender() = default;
  // Writes `bytes` after what was appended before; an error names the file.
  virtual absl::Status Append(absl::string_view bytes) = 0;
};

// The same for contents made a part at a time, so that a file larger than what its writer
// holds at once (a checkpoint's shard, copied from the device a unit at a time) is never
// whole in memory: `produce` appends them; its error (or an append's) removes the
// temporary file and is returned.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::FunctionRef<absl::Status(FileAppender&)> produce,
                                 bool replace);

// What an interrupted write of `name` left in `folder` (its temporary ".NAME.tmp-*" files:
// the process was killed between creating one and renaming it into place, say by a
// preemption in the middle of a checkpoint) is removed once it has not been modified for
// kAbandonedWriteAge before `now`: a write still running, elsewhere too, keeps its file.
// WriteFileAtomically calls it for the name it writes. Returns how many it removed.
inline constexpr absl::Duration kAbandonedWriteAge = absl::Hours(1);
int RemoveAbandonedWrites(const std::string& folder, const std::string& name, absl::Time now);

// As WriteFileAtomically, except that without `replace` a regular file already at `path`
// holding exactly `contents` is left as it is instead of refused: what an earlier attempt
// of the same job wrote (a job's outputs are written again when an attempt is re-queued).
// A file there that cannot be read to compare is that error (UNAVAILABLE for an I/O
// error, PERMISSION_DENIED), not ALREADY_EXISTS: it may be the same.
absl::Status WriteFileUnlessSame(const std::string& path, const std::string& contents,
                                 bool replace);

// Removes `name`, a folder of files, from `folder` (a job's output folder: canonical),
// never through a link: `folder` is opened component by component with O_NOFOLLOW, and
// `name` beneath it, so a link put in the path since the check is refused
// (PERMISSION_DENIED), and a link among the files is unlinked, never followed. The folder
// is first renamed to ".NAME.removing" and that synced, so that once this starts `name`
// is gone whole, even if the removal is cut short (a crash, a file that cannot be
// unlinked); RemoveInterruptedRemovals clears what is left. INVALID_ARGUMENT for a `name`
// that is not one plain name; NOT_FOUND if it is not there; FAILED_PRECONDITION if it
// holds a folder (left renamed).
absl::Status RemoveFolderOfFiles(const std::string& folder, const std::string& name);

// Removes the files `names` from `folder` (a job's output folder: canonical) where they
// are there, never through a link (`folder` opened as RemoveFolderOfFiles opens it; a link
// among the names is unlinked, not followed), then syncs the folder, so that they stay
// gone after a crash of the node. INVALID_ARGUMENT for a name that is not one plain name,
// FAILED_PRECONDITION for one that is a folder (nothing after it is removed).
absl::Status RemoveFiles(const std::string& folder, const std::vector<std::string>& names);

// Removes what a RemoveFolderOfFiles cut short left in `folder` of the names starting with
// `prefix` (".PREFIX....removing": a folder, or a link or file swapped in before the
// rename, unlinked, never followed), going on past one that cannot be removed (a folder
// inside, say); the first error is returned.
absl::Status RemoveInterruptedRemovals(const std::string& folder, const std::string& prefix);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_SAFE_WRITE_H_
