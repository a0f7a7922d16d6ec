// Uploads through pinned staging while the stream is held: a host function blocks the
// stream until a second thread releases it, so every staged copy is still unread when the
// next upload comes; each upload's source is overwritten as soon as Upload returns, and
// three times as many uploads are made as there are blocks (so the uploads past the blocks
// wait for the stream). A block handed out again before the GPU
// had read it, or a copy that read the caller's memory late, would leave a destination
// with another upload's values.

#include "worker/cuda/pinned_uploads.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

// The stream's work waits until `released` holds (a host function spinning on it).
void HoldUntil(std::atomic<bool>* released, cudaStream_t stream) {
  ASSERT_EQ(cudaLaunchHostFunc(
                stream,
                [](void* flag) {
                  while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
                },
                released),
            cudaSuccess);
}

// Each destination's bytes equal to its upload's number + 1.
void ExpectLanded(const std::vector<void*>& destinations, const std::vector<size_t>& sizes) {
  for (size_t u = 0; u < destinations.size(); ++u) {
    std::vector<uint8_t> landed(sizes[u]);
    ASSERT_EQ(cudaMemcpy(landed.data(), destinations[u], sizes[u], cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(landed, std::vector<uint8_t>(sizes[u], static_cast<uint8_t>(u + 1)))
        << "upload " << u;
  }
}

TEST(PinnedUploads, StagedUploadsLandWhileTheStreamIsHeld) {
  SKIP_WITHOUT_GPU();
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr size_t kUploads = 3 * kStagingBlocks;
  const std::vector<size_t> cycle = {1, 4096, 65536, 65544, 300000, kMaxStagedBytes, 12};
  std::vector<size_t> sizes;
  std::vector<void*> destinations;
  for (size_t u = 0; u < kUploads; ++u) {
    sizes.push_back(cycle[u % cycle.size()]);
    void* dst = nullptr;
    ASSERT_EQ(cudaMalloc(&dst, sizes.back()), cudaSuccess);
    destinations.push_back(dst);
  }
  std::atomic<bool> released{false};
  HoldUntil(&released, stream->get());
  // Released while the uploads past the blocks wait for the stream.
  std::thread releaser([&released] {
    absl::SleepFor(absl::Milliseconds(200));
    released = true;
  });
  auto uploads = PinnedUploads::Create();
  ASSERT_TRUE(uploads.ok()) << uploads.status();
  std::vector<uint8_t> source;
  for (size_t u = 0; u < kUploads; ++u) {
    source.assign(sizes[u], static_cast<uint8_t>(u + 1));
    EXPECT_TRUE((*uploads)->Upload(destinations[u], source.data(), sizes[u], stream->get()).ok());
    source.assign(sizes[u], 0xEE);  // the caller reuses its memory at once
  }
  releaser.join();
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectLanded(destinations, sizes);
  for (void* dst : destinations) cudaFree(dst);
}

TEST(PinnedUploads, LargeUploadsGoFromTheCallersMemory) {
  SKIP_WITHOUT_GPU();
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<size_t> sizes = {kMaxStagedBytes + 4};
  void* dst = nullptr;
  ASSERT_EQ(cudaMalloc(&dst, sizes[0]), cudaSuccess);
  auto uploads = PinnedUploads::Create();
  ASSERT_TRUE(uploads.ok()) << uploads.status();
  std::vector<uint8_t> source(sizes[0], 1);
  ASSERT_TRUE((*uploads)->Upload(dst, source.data(), sizes[0], stream->get()).ok());
  source.assign(sizes[0], 0xEE);
  ASSERT_TRUE(stream->Synchronize().ok());
  ExpectLanded({dst}, sizes);
  cudaFree(dst);
}

}  // namespace
}  // namespace shardwise::cuda
