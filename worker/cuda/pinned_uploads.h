#ifndef SHARDWISE_WORKER_CUDA_PINNED_UPLOADS_H_
#define SHARDWISE_WORKER_CUDA_PINNED_UPLOADS_H_

// Host-to-device copies that do not make the host wait for the GPU: the values are first
// copied into a page-locked (pinned) staging block, from which cudaMemcpyAsync is truly
// asynchronous. (The host does wait where every block is still being read, and may for
// uploads over kMaxStagedBytes, which go from pageable memory: a shard or optimizer state
// at start, or a micro-batch of more than 131,072 tokens per rank.) From pageable
// memory the driver may first synchronise with the stream to stage the copy itself, so each
// micro-batch's upload of its tokens would wait for the compute stream to drain: the GPU would run
// dry at every micro-step while the host queued the next. The blocks, kStagingBlocks of
// kMaxStagedBytes, are made by Create (with the device, before any collective) and reused
// until destruction (staging_choice.h): page-locked allocation and freeing synchronise with
// the GPU, so growing a block in a step could wait on an all-gather whose peers wait for this
// rank. Each block has its own event, recorded after the copy that read it, so it is handed
// out again only once the GPU has read it.
//
// Thread-safety: thread-safe (uploads from several threads take turns).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/cuda/staging_choice.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {

class PinnedUploads {
 public:
  // Allocates the blocks and their events.
  static absl::StatusOr<std::unique_ptr<PinnedUploads>> Create();
  // Waits for the copies still reading a block, then frees the blocks.
  ~PinnedUploads();
  PinnedUploads(const PinnedUploads&) = delete;
  PinnedUploads& operator=(const PinnedUploads&) = delete;

  // Copies `bytes` from host `src` to device `dst`, in order on `stream`; `src` may be
  // reused as soon as this returns. Larger uploads than kMaxStagedBytes copy from `src`
  // directly (also safe to reuse at return: the driver stages pageable memory before the
  // call returns).
  absl::Status Upload(void* dst, const void* src, size_t bytes, cudaStream_t stream);

 private:
  PinnedUploads() = default;

  struct Block {
    void* pinned = nullptr;  // kMaxStagedBytes
    Event read;              // recorded after the copy that last read the block
    bool recorded = false;
    uint64_t last_use = 0;
  };
  // The blocks' states now (busy: their copy has not run yet).
  absl::StatusOr<std::vector<StagingBlockState>> States() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A block that the GPU no longer reads; nullptr for kUnstaged.
  absl::StatusOr<Block*> Acquire(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<Block> blocks_ ABSL_GUARDED_BY(mu_);
  uint64_t uses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_PINNED_UPLOADS_H_
