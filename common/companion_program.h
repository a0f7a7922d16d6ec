#ifndef SHARDWISE_COMMON_COMPANION_PROGRAM_H_
#define SHARDWISE_COMMON_COMPANION_PROGRAM_H_

// Programs shipped with the calling one, run in its place, as git runs `git-foo` for
// `git foo`: the CLI's `sample` runs the worker's `shardwise-sample`, so the CLI links no
// training code, and its `tokenize` runs `shardwise-tokenize`, whose SentencePiece cannot
// share a process with the CLI's protobuf.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {

// Where the program `name` is, looked for in order: beside this program's own file (the
// bundle's bin/), at `runfiles_path` (relative to the workspace) in this program's Bazel
// runfiles (how bazel-bin runs it) and in those of the Bazel test that runs it
// ($RUNFILES_DIR, $TEST_SRCDIR), then on PATH. NOT_FOUND names every place looked in.
absl::StatusOr<std::string> FindCompanionProgram(absl::string_view name,
                                                 absl::string_view runfiles_path);

// Replaces this process with `program` run with `args` (args[0] is its name, as argv[0]).
// Returns only on failure.
absl::Status ExecProgram(const std::string& program, const std::vector<std::string>& args);

// Runs `program` with `args` (args[0] as argv[0]) and returns what it printed on its
// standard output; its standard error passes through. An exit status other than 0 is an
// error naming the program and the status (its own message is on standard error).
absl::StatusOr<std::string> RunAndCapture(const std::string& program,
                                          const std::vector<std::string>& args);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_COMPANION_PROGRAM_H_
