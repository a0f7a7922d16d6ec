#ifndef SHARDWISE_WORKER_CUDA_STAGING_CHOICE_H_
#define SHARDWISE_WORKER_CUDA_STAGING_CHOICE_H_

// Which page-locked staging block an upload takes (pinned_uploads.h): a pure decision, so
// it builds and is tested without a GPU (staging_choice_test). A block is busy from the
// upload that copied through it until the GPU has read it (its event has passed); the
// blocks are few and reused, so a step's batch uploads allocate nothing.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardwise::cuda {

// The smallest block: one micro-batch's tokens of GPT-2 at batch 8 x 1024 (INT64).
inline constexpr size_t kMinStagingBytes = size_t{64} << 10;
// Uploads larger than this (a shard or optimizer state at start) go without staging: a
// block kept for them would hold that much page-locked memory for the whole run. A
// micro-batch's tokens take 64 KiB at 8 x 1024, 256 KiB at 32 x 1024.
inline constexpr size_t kMaxStagedBytes = size_t{1} << 20;
// Blocks at most: a few micro-batches' uploads in flight at once.
inline constexpr size_t kMaxStagingBlocks = 8;

struct StagingBlockState {
  size_t capacity = 0;
  bool busy = false;
  uint64_t last_use = 0;  // higher: used later
};

struct StagingChoice {
  enum class Kind {
    kUnstaged,  // too large to stage: copy from the caller's memory
    kReuse,     // block `index` as it is
    kAllocate,  // a new block of `capacity`, appended
    kReplace,   // block `index` (free, too small) freed and allocated again at `capacity`
    kWait,      // every block busy: wait for block `index` (the least recently used), then
                // choose again
  };
  Kind kind = Kind::kUnstaged;
  size_t index = 0;
  size_t capacity = 0;
};

// The capacity a new block for `bytes` gets: a power of two, at least kMinStagingBytes.
size_t StagingCapacity(size_t bytes);

// For an upload of `bytes` (> 0): the smallest free block that holds it; else a new block
// while there are fewer than kMaxStagingBlocks; else the least recently used free block,
// grown; else a wait for the least recently used busy block.
StagingChoice ChooseStagingBlock(const std::vector<StagingBlockState>& blocks, size_t bytes);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_STAGING_CHOICE_H_
