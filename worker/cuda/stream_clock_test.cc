// The CUDA stream clock dates marks on the host's clock: marks around 20 GiB of memsets
// on a stream resolve once the stream is done, inside the host times around the work
// (within the reference's error), and at least a millisecond apart.

#include "worker/cuda/stream_clock.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

TEST(CudaStreamClock, MarksAreDatedOnTheHostsClock) {
  SKIP_WITHOUT_GPU();
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  CudaStreamClock clock(0, [&] { return std::make_pair(stream->get(), kComputeStreamLane); });
  constexpr size_t kBytes = size_t{1} << 30;
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, kBytes), cudaSuccess);

  const int64_t before = absl::ToUnixMicros(absl::Now());
  int lane = 0;
  std::unique_ptr<StreamClock::Mark> begin = clock.Record(&lane);
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(cudaMemsetAsync(buffer, i, kBytes, stream->get()), cudaSuccess);
  std::unique_ptr<StreamClock::Mark> end = clock.Record(&lane);
  ASSERT_TRUE(stream->Synchronize().ok());
  const int64_t after = absl::ToUnixMicros(absl::Now());
  ASSERT_NE(begin, nullptr);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(lane, kComputeStreamLane);

  const std::optional<int64_t> began = clock.PassedAt(*begin);
  const std::optional<int64_t> ended = clock.PassedAt(*end);
  ASSERT_TRUE(began.has_value() && ended.has_value());
  // The reference is dated within half its own record-and-synchronise span, which a
  // process's first synchronisation (or a virtual machine) may stretch past 100 us; a
  // misdated clock is off by far more than 1 ms next to the 4 ms this test spans.
  constexpr int64_t kReferenceErrorUs = 1000;
  EXPECT_GE(*began, before - kReferenceErrorUs);
  EXPECT_LE(*ended, after + kReferenceErrorUs);
  // 20 GiB written: over 4 ms even at an H200's 4.8 TB/s.
  EXPECT_GT(*ended - *began, 1000);
  std::printf("20 GiB of memset: %lld us on the device, %lld us on the host\n",
              static_cast<long long>(*ended - *began), static_cast<long long>(after - before));
  cudaFree(buffer);
}

// A thread that never chose a GPU (the progress publisher) asks the clock of the worker
// of GPU 1: it stays on GPU 1 afterwards rather than being sent "back" to GPU 0, which
// would create a context there (memory of the rank training on GPU 0).
TEST(ScopedCurrentGpu, AThreadWithoutAGpuIsNotSentToGpuZero) {
  SKIP_WITHOUT_GPU();
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs, found " << gpus;
  std::thread([] {
    EXPECT_EQ(thread_gpu, -1);
    { const ScopedCurrentGpu on_gpu(1); }
    int current = -1;
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, 1);
    EXPECT_EQ(thread_gpu, 1);
    // A thread Shardwise bound to GPU 1 gets GPU 1 back after visiting GPU 0.
    { const ScopedCurrentGpu visit(0); }
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, 1);
  }).join();
}

}  // namespace
}  // namespace shardwise::cuda
