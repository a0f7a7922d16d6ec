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

size_t StagingCapacity(size_t bytes) {
  size_t capacity = kMinStagingBytes;
  while (capacity < bytes) capacity *= 2;
  return capacity;
}

StagingChoice ChooseStagingBlock(const std::vector<StagingBlockState>& blocks, size_t bytes) {
  using Kind = StagingChoice::Kind;
  if (bytes > kMaxStagedBytes) return {Kind::kUnstaged, 0, 0};
  size_t smallest = kNone;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const StagingBlockState& block = blocks[i];
    if (block.busy || block.capacity < bytes) continue;
    if (smallest == kNone || block.capacity < blocks[smallest].capacity) smallest = i;
  }
  if (smallest != kNone) return {Kind::kReuse, smallest, blocks[smallest].capacity};
  if (blocks.size() < kMaxStagingBlocks)
    return {Kind::kAllocate, blocks.size(), StagingCapacity(bytes)};
  const size_t free = LeastRecentlyUsed(blocks, /*busy=*/false);
  if (free != kNone) return {Kind::kReplace, free, StagingCapacity(bytes)};
  const size_t oldest = LeastRecentlyUsed(blocks, /*busy=*/true);
  return {Kind::kWait, oldest, blocks[oldest].capacity};
}

}  // namespace shardwise::cuda
