#include "worker/cuda/staging_choice.h"

#include <limits>

namespace shardwise::cuda {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// The least recently used block whose busy flag is `busy`; kNone if there is none.
size_t LeastRecentlyUsed(const std::vector<StagingBlockState>& blocks, bool busy) {
  size_t found = kNone;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].busy != busy) continue;
    if (found == kNone || blocks[i].last_use < blocks[found].last_use) found = i;
  }
  return found;
}

}  // namespace

StagingChoice ChooseStagingBlock(const std::vector<StagingBlockState>& blocks, size_t bytes) {
  using Kind = StagingChoice::Kind;
  if (bytes > kMaxStagedBytes || blocks.empty()) return {Kind::kUnstaged, 0};
  const size_t free = LeastRecentlyUsed(blocks, /*busy=*/false);
  if (free != kNone) return {Kind::kReuse, free};
  return {Kind::kWait, LeastRecentlyUsed(blocks, /*busy=*/true)};
}

}  // namespace shardwise::cuda
