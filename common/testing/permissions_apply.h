#ifndef SHARDWISE_COMMON_TESTING_PERMISSIONS_APPLY_H_
#define SHARDWISE_COMMON_TESTING_PERMISSIONS_APPLY_H_

// Tests run as root, whom a file's permissions do not keep out (CAP_DAC_OVERRIDE,
// CAP_DAC_READ_SEARCH). AsReaderThatPermissionsKeepOut runs a call on a thread of its own
// without them (capabilities are a thread's), so that a file the test made unreadable is
// unreadable to the call as to any other user.

#include <optional>
#include <thread>
#include <utility>

#include "absl/status/status.h"

namespace shardwise {
namespace testing {

// Takes those capabilities from the calling thread; false if the kernel refused.
bool DropPermissionOverride();

// What `read` returns, called on a thread of its own that file permissions apply to;
// INTERNAL (as the Status or StatusOr `read` returns) if the kernel kept the override.
template <typename Read>
auto AsReaderThatPermissionsKeepOut(Read read) -> decltype(read()) {
  std::optional<decltype(read())> result;
  std::thread([&] {
    if (!DropPermissionOverride()) {
      result.emplace(absl::InternalError("the kernel refused to drop CAP_DAC_OVERRIDE"));
      return;
    }
    result.emplace(read());
  }).join();
  return *std::move(result);
}

}  // namespace testing
}  // namespace shardwise

#endif  // SHARDWISE_COMMON_TESTING_PERMISSIONS_APPLY_H_
