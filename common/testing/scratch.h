#ifndef SHARDWISE_COMMON_TESTING_SCRATCH_H_
#define SHARDWISE_COMMON_TESTING_SCRATCH_H_

// Where a test keeps its files. Bazel gives each test (each shard, each run) a folder of
// its own, $TEST_TMPDIR, emptied before it starts; a test binary run by hand gets one of
// its process under /tmp instead, so two runs never write each other's files and no test
// needs to put its process id into its names.

#include <string>
#include <string_view>

namespace shardwise::testing {

// The test's scratch folder; made if missing. The same for the whole process.
std::string ScratchRoot();

// `name` (which may hold folders) inside the scratch folder; nothing is made.
std::string ScratchPath(std::string_view name);

// An empty folder `name` inside the scratch folder, with its parents: what a file or
// folder of that name held before is removed first.
std::string FreshScratchFolder(std::string_view name);

}  // namespace shardwise::testing

#endif  // SHARDWISE_COMMON_TESTING_SCRATCH_H_
