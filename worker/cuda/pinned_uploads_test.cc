// Uploads through pinned staging while the stream is busy: each upload's source is
// overwritten as soon as Upload returns and more uploads are queued than there are
// blocks, so a block handed out again before the GPU had read it, or a copy that read
// the caller's memory late, would leave a destination with another upload's values.

#include "worker/cuda/pinned_uploads.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

TEST(PinnedUploads, EveryUploadLandsWhileTheStreamIsBusy) {
  SKIP_WITHOUT_GPU();
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  // Several milliseconds of memsets ahead of the uploads.
  constexpr size_t kBusyBytes = size_t{1} << 30;
  void* busy = nullptr;
  ASSERT_EQ(cudaMalloc(&busy, kBusyBytes), cudaSuccess);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(cudaMemsetAsync(busy, i, kBusyBytes, stream->get()), cudaSuccess);
  }
  // Sizes around a block's, one unstaged.
  const std::vector<size_t> sizes = {
      1, 4096, kMinStagingBytes, kMinStagingBytes + 8, 300000, kMaxStagedBytes + 4, 12};
  constexpr int kUploads = 3 * static_cast<int>(kMaxStagingBlocks);
  PinnedUploads uploads;
  std::vector<void*> destinations;
  std::vector<uint8_t> source;
  for (int u = 0; u < kUploads; ++u) {
    const size_t bytes = sizes[u % sizes.size()];
    source.assign(bytes, static_cast<uint8_t>(u + 1));
    void* dst = nullptr;
    ASSERT_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
    destinations.push_back(dst);
    ASSERT_TRUE(uploads.Upload(dst, source.data(), bytes, stream->get()).ok());
    source.assign(bytes, 0xEE);  // the caller reuses its memory at once
  }
  ASSERT_TRUE(stream->Synchronize().ok());
  for (int u = 0; u < kUploads; ++u) {
    const size_t bytes = sizes[u % sizes.size()];
    std::vector<uint8_t> landed(bytes);
    ASSERT_EQ(cudaMemcpy(landed.data(), destinations[u], bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(landed, std::vector<uint8_t>(bytes, static_cast<uint8_t>(u + 1))) << "upload " << u;
    cudaFree(destinations[u]);
  }
  cudaFree(busy);
}

}  // namespace
}  // namespace shardwise::cuda
