#ifndef SHARDWISE_WORKER_CUDA_STAGING_CHOICE_H_
#define SHARDWISE_WORKER_CUDA_STAGING_CHOICE_H_

// Which page-locked staging block an upload takes (pinned_uploads.h): a pure decision, so
// it builds and is tested without a GPU (staging_choice_test). A block is busy from the
// upload that copied through it until the GPU has read it (its event has passed). The
// blocks are all of one size and live as long as the device (pinned_uploads.h says why),
// so the choice is only which free block, or which busy one to wait for.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardwise::cuda {

// Each block's size, and the largest upload staged: a micro-batch's tokens take 64 KiB at
// 8 x 1024 (INT64), 256 KiB at 32 x 1024. Larger uploads (a shard or optimizer state at
// start) go without staging.
inline constexpr size_t kMaxStagedBytes = size_t{1} << 20;
// The blocks: a few micro-batches' uploads in flight at once (8 MiB page-locked in all).
inline constexpr size_t kStagingBlocks = 8;

struct StagingBlockState {
  bool busy = false;
  uint64_t last_use = 0;  // higher: used later
};

struct StagingChoice {
  enum class Kind {
    kUnstaged,  // too large to stage (or no block): copy from the caller's memory
    kReuse,     // block `index`, free
    kWait,      // every block busy: wait for block `index` (the least recently used), then
                // choose again
  };
  Kind kind = Kind::kUnstaged;
  size_t index = 0;
};

// For an upload of `bytes` (> 0): the least recently used free block; else a wait for the
// least recently used busy one.
StagingChoice ChooseStagingBlock(const std::vector<StagingBlockState>& blocks, size_t bytes);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_STAGING_CHOICE_H_
