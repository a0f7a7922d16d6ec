#ifndef SHARDWISE_TOKENIZER_DURABLE_RENAME_H_
#define SHARDWISE_TOKENIZER_DURABLE_RENAME_H_

// What `shardwise tokenize` writes (token files, the tokenizer's files, the manifest) goes
// to PATH.tmp first and is renamed into place. The file's bytes are synced before the
// rename and the folder after it, so that after a power loss PATH is the old file, or
// none, or the whole new one: never a shorter one, which for a token file of even length
// would pass for a smaller corpus. (The job outputs' writer, common/safe_write.h, also
// refuses links and relative paths; a user's own output folder may be either.)

#include <string>

#include "absl/status/status.h"

namespace shardwise {
namespace tokenizer {

// Syncs `temporary` (written and closed), renames it to `path` and syncs the folder;
// errors name the file.
absl::Status SyncAndRename(const std::string& temporary, const std::string& path);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_DURABLE_RENAME_H_
