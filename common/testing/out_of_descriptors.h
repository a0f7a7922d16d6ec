#ifndef SHARDWISE_COMMON_TESTING_OUT_OF_DESCRIPTORS_H_
#define SHARDWISE_COMMON_TESTING_OUT_OF_DESCRIPTORS_H_

// A process out of file descriptors (EMFILE), for tests of what a host that cannot open a
// file now reports (UNAVAILABLE: not the file's fault, nor the job's).

#include <functional>

namespace shardwise::testing {

// Runs `check` in a forked child whose descriptor limit is lowered to 64 and then used up,
// and returns what it returned (its exit code; small values, 0 for success), or -1 when
// the child could not be set up or did not exit normally. `check` must not use gtest's
// assertions: they would fail in the child, not in the test.
int ExitCodeWithoutFileDescriptors(const std::function<int()>& check);

}  // namespace shardwise::testing

#endif  // SHARDWISE_COMMON_TESTING_OUT_OF_DESCRIPTORS_H_
