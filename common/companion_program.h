#ifndef SHARDWISE_COMMON_COMPANION_PROGRAM_H_
#define SHARDWISE_COMMON_COMPANION_PROGRAM_H_

// Programs shipped with the calling one, run in its place, as git runs `git-foo` for
// `git foo`: the CLI's `sample` runs the worker's `shardwise-sample`, so the CLI links no
// training code, and its `tokenize` runs `shardwise-tokenize`, whose SentencePiece cannot
// share a process with the CLI's protobuf. The sampler in turn runs `shardwise-tokenize`.
//
// Where the programs are depends on how they were built:
//   - the unpacked bundle (//:bundle): all of them side by side in bin/;
//   - bazel-bin, or `bazel run`: each target the user built has a runfiles tree beside its
//     file (`shardwise.runfiles/shardwise/...`) holding the programs it carries as data,
//     but a program it carries has no tree of its own unless it was built as a target of
//     its own too (`bazel build //...` does; `./dev.sh demo` builds only the CLI and the
//     daemons);
//   - a Bazel test: the test's runfiles, named by $RUNFILES_DIR.
// So a chain of companions (the CLI, then the sampler, then the tokenizer) is resolved in
// the runfiles of the program that started it: a program that finds a companion in a
// runfiles tree runs it with $RUNFILES_DIR naming that tree, as Bazel's own runfiles
// libraries hand their tree to the programs they start.
//
// Thread-safety: the functions read the environment and may be called from any thread;
// RunAndCapture allocates nothing between fork and exec.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {

struct CompanionProgram {
  std::string path;
  // The runfiles tree (the folder holding "shardwise/") the program was found in, handed
  // to it as $RUNFILES_DIR; empty where it was found beside this program or on PATH,
  // which leaves the environment as it is.
  std::string runfiles_dir;
};

// Where the program `name` is, looked for in order: beside this program's own file (the
// bundle's bin/), at `runfiles_path` (relative to the workspace) in this program's own
// runfiles tree, then in the tree that started the chain or the Bazel test ($RUNFILES_DIR,
// $TEST_SRCDIR), then on PATH. NOT_FOUND names every place looked in.
absl::StatusOr<CompanionProgram> FindCompanionProgram(absl::string_view name,
                                                      absl::string_view runfiles_path);

// Replaces this process with `program` run with `args` (args[0] is its name, as argv[0]).
// Returns only on failure.
absl::Status ExecProgram(const CompanionProgram& program, const std::vector<std::string>& args);

// Runs `program` with `args` (args[0] as argv[0]) and returns what it printed on its
// standard output; its standard error passes through. An exit status other than 0 is an
// error naming the program and the status (its own message is on standard error).
absl::StatusOr<std::string> RunAndCapture(const CompanionProgram& program,
                                          const std::vector<std::string>& args);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_COMPANION_PROGRAM_H_
