#include "worker/cuda/pinned_uploads.h"

#include <cstring>

#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {

PinnedUploads::~PinnedUploads() {
  absl::MutexLock lock(&mu_);
  for (Block& block : blocks_) {
    // A copy still reading the block must end before its memory goes back.
    if (block.recorded) block.read.Synchronize().IgnoreError();
    if (block.pinned != nullptr) cudaFreeHost(block.pinned);
  }
}

absl::StatusOr<std::vector<StagingBlockState>> PinnedUploads::States() const {
  std::vector<StagingBlockState> states;
  states.reserve(blocks_.size());
  for (const Block& block : blocks_) {
    bool busy = false;
    if (block.recorded) {
      ASSIGN_OR_RETURN(const bool done, block.read.Done());
      busy = !done;
    }
    states.push_back({busy, block.last_use});
  }
  return states;
}

absl::StatusOr<std::unique_ptr<PinnedUploads>> PinnedUploads::Create() {
  std::unique_ptr<PinnedUploads> uploads(new PinnedUploads());
  absl::MutexLock lock(&uploads->mu_);
  uploads->blocks_.resize(kStagingBlocks);
  for (Block& block : uploads->blocks_) {
    ASSIGN_OR_RETURN(block.read, Event::Create());
    RETURN_IF_CUDA_ERROR(cudaMallocHost(&block.pinned, kMaxStagedBytes));
  }
  return uploads;
}

absl::StatusOr<PinnedUploads::Block*> PinnedUploads::Acquire(size_t bytes) {
  while (true) {
    ASSIGN_OR_RETURN(const std::vector<StagingBlockState> states, States());
    const StagingChoice choice = ChooseStagingBlock(states, bytes);
    switch (choice.kind) {
      case StagingChoice::Kind::kUnstaged:
        return nullptr;
      case StagingChoice::Kind::kReuse:
        return &blocks_[choice.index];
      case StagingChoice::Kind::kWait:
        // Every block in flight: the host waits for the oldest copy (rare: more uploads
        // queued than the blocks the GPU has not read yet).
        RETURN_IF_ERROR(blocks_[choice.index].read.Synchronize());
        break;
    }
  }
}

absl::Status PinnedUploads::Upload(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Block* const block, Acquire(bytes));
  if (block == nullptr) {
    RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    return absl::OkStatus();
  }
  std::memcpy(block->pinned, src, bytes);
  RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst, block->pinned, bytes, cudaMemcpyHostToDevice, stream));
  if (absl::Status recorded = block->read.Record(stream); !recorded.ok()) {
    // Unmarked, the block would look free while the copy still reads it: the copy is
    // waited for here instead.
    const cudaError_t waited = cudaStreamSynchronize(stream);
    return waited == cudaSuccess ? recorded : CudaStatus(waited, "cudaStreamSynchronize");
  }
  block->recorded = true;
  block->last_use = ++uses_;
  return absl::OkStatus();
}

}  // namespace shardwise::cuda
