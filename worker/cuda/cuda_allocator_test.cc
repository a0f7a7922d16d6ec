#include "worker/cuda/cuda_allocator.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

TEST(CudaCachingAllocatorTest, CountsLiveAndPeakBytesAndReusesFreedBlocks) {
  SKIP_WITHOUT_GPU();
  auto stream = Stream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  CudaCachingAllocator allocator(stream->get());
  {
    Buffer a(&allocator, 1000, MemoryCategory::kParameters);
    Buffer b(&allocator, 3000, MemoryCategory::kGradients);
    EXPECT_EQ(allocator.Stats().live(MemoryCategory::kParameters), 4000);
    EXPECT_EQ(allocator.Stats().live(MemoryCategory::kGradients), 12000);
  }
  MemoryStats stats = allocator.Stats();
  EXPECT_EQ(stats.live(MemoryCategory::kParameters), 0);
  EXPECT_EQ(stats.peak(MemoryCategory::kGradients), 12000);
  EXPECT_GE(stats.cached_bytes, 16000);
  EXPECT_EQ(allocator.device_allocations(), 2);
  // Held from the driver in 512-byte granules: 4096 + 12288.
  EXPECT_EQ(stats.reserved_bytes, 4096 + 12288);
  EXPECT_EQ(stats.peak_live_bytes, 16000);

  // The same sizes again, as every FSDP step asks: served from the cache.
  for (int step = 0; step < 10; ++step) {
    Buffer a(&allocator, 1000, MemoryCategory::kParameters);
    Buffer b(&allocator, 3000, MemoryCategory::kGradients);
  }
  EXPECT_EQ(allocator.device_allocations(), 2);

  // Zero-filled on the allocator's stream, even when the block held data before.
  {
    Buffer dirty(&allocator, 1000, MemoryCategory::kActivations, /*zero=*/false);
    ASSERT_EQ(cudaMemset(dirty.data(), 0xff, dirty.bytes()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  Buffer zeroed(&allocator, 1000, MemoryCategory::kActivations);
  ASSERT_TRUE(stream->Synchronize().ok());
  std::vector<float> host(1000, 1.0f);
  ASSERT_EQ(cudaMemcpy(host.data(), zeroed.data(), zeroed.bytes(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (float v : host) ASSERT_EQ(v, 0.0f);

  allocator.ReleaseCache();
  EXPECT_EQ(allocator.Stats().cached_bytes, 0);
  EXPECT_EQ(allocator.Stats().reserved_bytes, 4096);  // `zeroed`'s block, still in use
}

TEST(CudaCachingAllocatorTest, AnImpossibleAllocationThrowsBadAlloc) {
  SKIP_WITHOUT_GPU();
  CudaCachingAllocator allocator(nullptr);
  try {
    allocator.Allocate(size_t{1} << 50, MemoryCategory::kActivations);
    ADD_FAILURE() << "a petabyte was allocated";
  } catch (const AllocationFailure& failure) {
    EXPECT_TRUE(failure.out_of_memory()) << failure.what();  // not a device fault
  }
  // The device is still usable afterwards.
  Buffer ok(&allocator, 16, MemoryCategory::kActivations);
  EXPECT_FALSE(ok.empty());
}

// A zero fill the runtime refuses to enqueue leaves the block unzeroed, and such an error
// is not sticky (no later synchronisation reports it): it goes to the owner's sink, which
// CudaDevice points at its first-error status. Where the runtime has no GPU it refuses
// every launch, so a machine without one shows the path; on a GPU every fill is
// enqueued.
TEST(CudaCachingAllocatorTest, AZeroFillTheRuntimeRefusesGoesToTheErrorSink) {
  if (::shardwise::cuda::testing::NoGpuReason().empty()) {
    GTEST_SKIP() << "on a GPU the runtime enqueues every fill; the refusal needs a machine "
                    "without one";
  }
  std::vector<absl::Status> errors;
  CudaCachingAllocator allocator([] { return cudaStream_t{nullptr}; },
                                 [&](const absl::Status& status) { errors.push_back(status); });
  std::vector<char> block(64, 1);
  allocator.ZeroFill(block.data(), block.size());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_FALSE(errors[0].ok());
  EXPECT_NE(errors[0].message().find("cudaMemsetAsync zeroing a 64-byte block"), std::string::npos)
      << errors[0];
  // Without a sink the error is logged, and the call still returns.
  CudaCachingAllocator unobserved(cudaStream_t{nullptr});
  unobserved.ZeroFill(block.data(), block.size());
}

TEST(CudaStreamTest, EventsOrderWorkAcrossStreams) {
  SKIP_WITHOUT_GPU();
  auto streams = FsdpStreams::Create();
  ASSERT_TRUE(streams.ok()) << streams.status();
  // unshard writes, compute reads after waiting for unshard's event: FSDP's pattern.
  const size_t n = 1 << 24;
  float* data = nullptr;
  float* copy = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&copy), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(data, 0x3f, n * sizeof(float), streams->unshard.get()), cudaSuccess);
  auto event = Event::Create();
  ASSERT_TRUE(event.ok());
  ASSERT_TRUE(event->Record(streams->unshard.get()).ok());
  ASSERT_TRUE(streams->compute.WaitFor(*event).ok());
  ASSERT_EQ(cudaMemcpyAsync(copy, data, n * sizeof(float), cudaMemcpyDeviceToDevice,
                            streams->compute.get()),
            cudaSuccess);
  ASSERT_TRUE(streams->compute.Synchronize().ok());
  const absl::StatusOr<bool> done = event->Done();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(*done);
  std::vector<uint32_t> host(16);
  ASSERT_EQ(cudaMemcpy(host.data(), copy + n - 16, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint32_t v : host) EXPECT_EQ(v, 0x3f3f3f3fu);
  cudaFree(data);
  cudaFree(copy);
}

}  // namespace
}  // namespace shardwise::cuda
