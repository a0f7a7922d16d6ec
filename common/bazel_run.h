#ifndef SHARDWISE_COMMON_BAZEL_RUN_H_
#define SHARDWISE_COMMON_BAZEL_RUN_H_

// `bazel run //client:shardwise -- ARGS` starts the program in its runfiles folder and
// names the folder the user typed the command in as $BUILD_WORKING_DIRECTORY. A program
// that takes paths from its user (the CLI, the sampler, the tokenizer) moves there first,
// so that a relative path means what the user meant.

#include "absl/status/status.h"

namespace shardwise {

// Changes to $BUILD_WORKING_DIRECTORY where it is set; does nothing where it is not (any
// run but `bazel run`). A folder that cannot be entered is FAILED_PRECONDITION naming it.
absl::Status EnterBazelRunWorkingDirectory();

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_BAZEL_RUN_H_
