#include "worker/runtime/memory.h"

#include <new>
#include <string>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(CpuCachingAllocator, CountsLiveAndPeakPerCategory) {
  CpuCachingAllocator allocator;
  {
    Buffer params(&allocator, 1000, MemoryCategory::kParameters);
    Buffer grads(&allocator, 250, MemoryCategory::kGradients);
    EXPECT_EQ(allocator.Stats().live(MemoryCategory::kParameters), 4000);
    EXPECT_EQ(allocator.Stats().live(MemoryCategory::kGradients), 1000);
    {
      Buffer full(&allocator, 3000, MemoryCategory::kParameters);
      EXPECT_EQ(allocator.Stats().live(MemoryCategory::kParameters), 16000);
    }
    // Freed really means freed in the counters, though the block is cached.
    EXPECT_EQ(allocator.Stats().live(MemoryCategory::kParameters), 4000);
    EXPECT_EQ(allocator.Stats().peak(MemoryCategory::kParameters), 16000);
    EXPECT_EQ(allocator.Stats().cached_bytes, 12000);
  }
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kParameters), 0);
  allocator.ResetPeaks();
  EXPECT_EQ(allocator.Stats().peak(MemoryCategory::kParameters), 0);
}

TEST(CpuCachingAllocator, ReusesFreedBlocksOfTheSameSize) {
  CpuCachingAllocator allocator;
  float* first;
  {
    Buffer b(&allocator, 512, MemoryCategory::kActivations);
    first = b.data();
  }
  Buffer again(&allocator, 512, MemoryCategory::kActivations);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.data()[0], 0.0f);  // zeroed on request
  EXPECT_EQ(allocator.Stats().cached_bytes, 0);
  allocator.ReleaseCache();
}

// Reserved bytes are what the allocator holds (blocks in use and cached, 64-byte
// lines): the cache keeps them up until it is released.
TEST(CpuCachingAllocator, CountsWhatItHoldsAndTheLivePeakOfAllCategories) {
  CpuCachingAllocator allocator;
  {
    Buffer params(&allocator, 1000, MemoryCategory::kParameters);  // 4000 -> 4032 held
    {
      Buffer acts(&allocator, 10, MemoryCategory::kActivations);  // 40 -> 64 held
      EXPECT_EQ(allocator.Stats().reserved_bytes, 4032 + 64);
    }
    Buffer grads(&allocator, 5, MemoryCategory::kGradients);  // 20 -> 64 held
    const MemoryStats stats = allocator.Stats();
    EXPECT_EQ(stats.live_total(), 4020);
    EXPECT_EQ(stats.peak_live_bytes, 4040);  // params and acts together
    EXPECT_EQ(stats.reserved_bytes, 4032 + 64 + 64);
  }
  EXPECT_EQ(allocator.Stats().reserved_bytes, 4032 + 64 + 64);  // cached
  allocator.ReleaseCache();
  EXPECT_EQ(allocator.Stats().reserved_bytes, 0);
  EXPECT_EQ(allocator.Stats().peak_reserved_bytes, 4032 + 64 + 64);
  allocator.ResetPeaks();
  EXPECT_EQ(allocator.Stats().peak_reserved_bytes, 0);
  EXPECT_EQ(allocator.Stats().peak_live_bytes, 0);
}

// Within a cgroup's limit, Linux grants every allocation and kills the process once the
// memory is used: the allocator asks its headroom first, giving back its cache to make
// room, and refuses (out of memory, naming the limit) what still does not fit.
TEST(CpuCachingAllocator, RefusesWhatItsHeadroomCannotTakeAfterGivingBackItsCache) {
  constexpr size_t kMiB = size_t{1} << 20;
  const CpuCachingAllocator* self = nullptr;
  int64_t limit = 200 * kMiB;  // the limit, less what this allocator holds
  CpuCachingAllocator allocator(
      [&] { return limit < 0 ? -1 : limit - self->Stats().reserved_bytes; });
  self = &allocator;
  { Buffer cached(&allocator, 100 * kMiB / 4, MemoryCategory::kActivations, false); }
  ASSERT_EQ(allocator.Stats().cached_bytes, static_cast<int64_t>(100 * kMiB));
  // 100 MiB more (another size) and the 64 MiB reserve fit once the cache is given back.
  Buffer fits(&allocator, 100 * kMiB / 4 + 16, MemoryCategory::kActivations, false);
  EXPECT_EQ(allocator.Stats().cached_bytes, 0);
  try {
    Buffer refused(&allocator, 50 * kMiB / 4, MemoryCategory::kGradients, false);
    ADD_FAILURE() << "50 MiB past a limit that leaves less than 100 MiB were allocated";
  } catch (const AllocationFailure& failure) {
    EXPECT_TRUE(failure.out_of_memory());
    EXPECT_NE(std::string(failure.what())
                  .find("could not allocate 50.0 MiB of gradients on the "
                        "host (this worker's memory limit, its cgroup's "
                        "memory.max, leaves"),
              std::string::npos)
        << failure.what();
  }
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kGradients), 0);
  // Small blocks are not asked about; without a limit (-1) nothing is.
  Buffer small(&allocator, kMiB / 8, MemoryCategory::kGradients, false);
  limit = -1;
  Buffer unlimited(&allocator, 50 * kMiB / 4, MemoryCategory::kGradients, false);
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kGradients),
            static_cast<int64_t>(kMiB / 2 + 50 * kMiB));
}

// Out of memory is the job's size (RESOURCE_EXHAUSTED); an allocation refused by a device
// that faulted is not, and says why (INTERNAL).
TEST(AllocationFailure, IsOutOfMemoryUnlessAFaultIsNamed) {
  const absl::Status oom = AllocationFailureStatus(
      AllocationFailure(3 << 20, MemoryCategory::kActivations, "GPU"), "training");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.message(),
            "out of memory while training: could not allocate 3.0 MiB of activations on the GPU");
  const absl::Status fault = AllocationFailureStatus(
      AllocationFailure(1 << 20, MemoryCategory::kGradients, "GPU", "cudaErrorIllegalAddress"));
  EXPECT_EQ(fault.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(fault.message(),
            "device failure: could not allocate 1.0 MiB of gradients on the GPU: "
            "cudaErrorIllegalAddress");
  EXPECT_EQ(AllocationFailureStatus(std::bad_alloc()).code(), absl::StatusCode::kResourceExhausted);
}

TEST(Buffer, SizesByElementType) {
  CpuCachingAllocator allocator;
  Buffer half(&allocator, 10, MemoryCategory::kCommunication, ScalarType::kBFloat16);
  Buffer ids(&allocator, 3, MemoryCategory::kActivations, ScalarType::kInt64);
  EXPECT_EQ(half.bytes(), 20u);
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kCommunication), 20);
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kActivations), 24);
  ids.as<int64_t>()[2] = -7;
  EXPECT_EQ(ids.as<int64_t>()[2], -7);
  half.Reset();
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kCommunication), 0);
}

TEST(Buffer, MovesOwnership) {
  CpuCachingAllocator allocator;
  Buffer a(&allocator, 10, MemoryCategory::kGradients);
  Buffer b = std::move(a);
  // What a moved-from Buffer holds is part of its contract: nothing.
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.numel(), 10u);
  b.Reset();
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kGradients), 0);
}

}  // namespace
}  // namespace shardwise
