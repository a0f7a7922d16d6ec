// The stream-ordering checker's own rules: streams run later and in order, fences order
// streams, and what a GPU would leave unordered shows as poison.

#include "worker/testing/async_cpu_device.h"

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace shardwise::testing {
namespace {

using Lane = Device::CommLane;

constexpr size_t kN = 1024;

StreamTiming NoPauses() {
  StreamTiming timing;
  timing.max_pause = absl::ZeroDuration();
  return timing;
}

std::vector<float> Read(AsyncCpuDevice& device, const float* data, size_t n = kN) {
  std::vector<float> host(n);
  EXPECT_TRUE(device.CopyToHost(host.data(), data, n * sizeof(float)).ok());
  return host;
}

// Holds a stream at its current point until released: the stream's later tasks wait.
class StreamHold {
 public:
  explicit StreamHold(EmulatedStream& stream) {
    stream.Enqueue([this] { release_.WaitForNotification(); });
  }
  ~StreamHold() { Release(); }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

 private:
  absl::Notification release_;
};

TEST(EmulatedStream, RunsTasksLaterAndInTheirOrder) {
  EmulatedStream stream("test", StreamTiming{});
  absl::Notification go;
  std::vector<int> ran;
  stream.Enqueue([&] { go.WaitForNotification(); });
  for (int i = 0; i < 50; ++i) stream.Enqueue([&ran, i] { ran.push_back(i); });
  EXPECT_TRUE(ran.empty());  // the host went on: the first task still waits
  go.Notify();
  stream.Drain();
  ASSERT_EQ(ran.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ran[i], i);
}

TEST(AsyncCpuDevice, ANewBlockIsPoisonUntilWritten) {
  AsyncCpuDevice device(NoPauses());
  Buffer buffer(device.allocator(), kN, MemoryCategory::kActivations, /*zero=*/false);
  for (float v : Read(device, buffer.data())) ASSERT_TRUE(std::isnan(v));
  Buffer zeroed(device.allocator(), kN, MemoryCategory::kActivations, /*zero=*/true);
  for (float v : Read(device, zeroed.data())) ASSERT_EQ(v, 0.0f);
}

TEST(AsyncCpuDevice, OperationsOfOneStreamRunInTheirOrder) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    StreamTiming timing;
    timing.seed = seed;
    AsyncCpuDevice device(timing);
    Buffer data(device.allocator(), kN, MemoryCategory::kActivations);
    const std::vector<float> ones(kN, 1.0f);
    device.CopyFromHost(data.data(), ones.data(), kN * sizeof(float));
    device.Multiply(data.data(), kN, 3.0f);
    device.Accumulate(data.data(), data.data(), kN);
    device.Divide(data.data(), kN, 2.0f);
    for (float v : Read(device, data.data())) ASSERT_EQ(v, 3.0f) << "seed " << seed;
  }
}

// One thread produces on the unshard stream, another consumes on the compute stream. With
// the fence the consumer reads what was produced; without it, it reads the block before
// the producer ran: the poison of a new block.
TEST(AsyncCpuDevice, AFenceOrdersStreamsAndAMissingWaitReadsPoison) {
  for (const bool wait : {true, false}) {
    AsyncCpuDevice device(NoPauses());
    Buffer produced(device.allocator(), kN, MemoryCategory::kParameters, /*zero=*/false);
    Buffer consumed(device.allocator(), kN, MemoryCategory::kParameters, /*zero=*/false);
    StreamHold hold(device.LaneStream(Lane::kUnshard));  // the producer runs late
    std::shared_ptr<Device::Fence> fence;
    const std::vector<float> twos(kN, 2.0f);
    std::thread([&] {
      device.UseCommunicationStream(Lane::kUnshard);
      device.CopyFromHost(produced.data(), twos.data(), kN * sizeof(float));
      fence = device.RecordFence();
    }).join();
    if (wait) device.WaitForFence(fence.get());
    device.Copy(consumed.data(), produced.data(), kN * sizeof(float));
    if (wait) {
      EXPECT_FALSE(device.FencePassed(fence.get()));
      hold.Release();
    } else {
      ASSERT_TRUE(device.Synchronize().ok());  // the consumer ran; the producer did not
      hold.Release();
    }
    const std::vector<float> got = Read(device, consumed.data());
    if (wait) {
      EXPECT_EQ(got, twos);
    } else {
      for (float v : got) ASSERT_TRUE(std::isnan(v));
    }
    device.DrainAll();
  }
}

// A block freed by the compute stream's thread while the unshard stream still reads it,
// unordered, then handed out again on the compute stream: the reader sees the poison the
// new allocation puts there first, as it would see the new owner's data on a GPU.
TEST(AsyncCpuDevice, ABlockReusedWhileAnotherStreamReadsItIsPoisonThere) {
  AsyncCpuDevice device(NoPauses());
  Buffer copy(device.allocator(), kN, MemoryCategory::kActivations, /*zero=*/false);
  auto source = std::make_unique<Buffer>(device.allocator(), kN, MemoryCategory::kActivations,
                                         /*zero=*/false);
  const std::vector<float> ones(kN, 1.0f);
  device.CopyFromHost(source->data(), ones.data(), kN * sizeof(float));
  ASSERT_TRUE(device.Synchronize().ok());
  float* const source_block = source->data();
  StreamHold hold(device.LaneStream(Lane::kUnshard));
  std::thread([&] {
    device.UseCommunicationStream(Lane::kUnshard);
    device.Copy(copy.data(), source_block, kN * sizeof(float));  // runs after the hold
  }).join();
  source.reset();  // freed to the compute stream's pool, no wait for the reader
  // Handed out again on the compute stream, idle: poisoned at once, on the host.
  Buffer reused(device.allocator(), kN, MemoryCategory::kActivations, /*zero=*/false);
  ASSERT_EQ(reused.data(), source_block);  // the same stream gets the same block back
  hold.Release();
  device.DrainAll();
  for (float v : Read(device, copy.data())) ASSERT_TRUE(std::isnan(v));
}

// A block handed out again on a busy stream is poisoned where that stream stands: a
// write by another stream that is not ordered after that point is lost to the poison.
TEST(AsyncCpuDevice, ABlockReusedOnABusyStreamIsPoisonedInThatStreamsOrder) {
  AsyncCpuDevice device(NoPauses());
  auto first = std::make_unique<Buffer>(device.allocator(), kN, MemoryCategory::kActivations,
                                        /*zero=*/false);
  float* const block = first->data();
  first.reset();
  StreamHold busy(device.CurrentStream());  // the compute stream has work pending
  Buffer reused(device.allocator(), kN, MemoryCategory::kActivations, /*zero=*/false);
  ASSERT_EQ(reused.data(), block);
  const std::vector<float> twos(kN, 2.0f);
  std::thread([&] {
    device.UseCommunicationStream(Lane::kReduction);
    device.CopyFromHost(reused.data(), twos.data(), kN * sizeof(float));  // unordered
    ASSERT_TRUE(device.Synchronize().ok());  // written before the compute stream's poison
  }).join();
  busy.Release();
  for (float v : Read(device, reused.data())) ASSERT_TRUE(std::isnan(v));
}

TEST(StreamPoolAllocator, AFreedBlockGoesOnlyToItsOwnStream) {
  AsyncCpuDevice device(NoPauses());
  auto block = std::make_unique<Buffer>(device.allocator(), kN, MemoryCategory::kGradients);
  const float* freed = block->data();
  block.reset();
  std::thread([&] {
    device.UseCommunicationStream(Lane::kReduction);
    Buffer other(device.allocator(), kN, MemoryCategory::kGradients);
    EXPECT_NE(other.data(), freed);
  }).join();
  Buffer again(device.allocator(), kN, MemoryCategory::kGradients);
  EXPECT_EQ(again.data(), freed);
  EXPECT_EQ(device.allocator()->Stats().live(MemoryCategory::kGradients),
            static_cast<int64_t>(kN * sizeof(float)));
}

// The CUDA device's type rules: values an elementwise kernel takes share one stored type,
// a GEMM's are FP32 or its operands' type. Within them the device stays healthy; the
// first breach becomes its error, named, as the failed launch would on a GPU.
TEST(AsyncCpuDevice, RefusesTheTypeMixesTheCudaDeviceRefuses) {
  constexpr ScalarType kBf16 = ScalarType::kBFloat16, kFp16 = ScalarType::kFloat16;
  AsyncCpuDevice device(NoPauses(), /*low_precision_storage=*/true);
  Buffer a(device.allocator(), kN, MemoryCategory::kActivations, kBf16);
  Buffer b(device.allocator(), kN, MemoryCategory::kActivations, kBf16);
  Buffer wide(device.allocator(), kN, MemoryCategory::kActivations);
  Buffer half(device.allocator(), kN, MemoryCategory::kActivations, kFp16);
  device.Accumulate(a.ref(), b.ref(), kN);
  device.LinearForward(a.ref(), wide.ref(), nullptr, 32, 32, 32, b.ref(), kBf16);
  ASSERT_TRUE(device.Synchronize().ok()) << device.status();

  device.LinearForward(half.ref(), wide.ref(), nullptr, 32, 32, 32, b.ref(), kBf16);
  const absl::Status gemm = device.Synchronize();
  EXPECT_EQ(gemm.code(), absl::StatusCode::kInternal);
  EXPECT_NE(gemm.message().find("LinearForward: a value stored in FP16 with BF16 operands"),
            std::string::npos)
      << gemm;
  device.Accumulate(a.ref(), wide.ref(), kN);  // the first error stays
  EXPECT_EQ(device.status(), gemm);

  AsyncCpuDevice other(NoPauses(), /*low_precision_storage=*/true);
  Buffer x(other.allocator(), kN, MemoryCategory::kActivations, kBf16);
  Buffer y(other.allocator(), kN, MemoryCategory::kActivations);
  other.ActivationForward(v1::Activation::GELU, x.ref(), kN, y.ref());
  EXPECT_NE(other.Synchronize().message().find("ActivationForward: its values are stored in "
                                               "different types (BF16, FP32)"),
            std::string::npos)
      << other.status();
}

// A norm's weights are FP32 or its rows' type: BF16 rows with FP32 or BF16 weights pass,
// FP32 rows with BF16 weights are refused, named.
TEST(AsyncCpuDevice, RefusesNormWeightsOfAnotherSixteenBitType) {
  constexpr ScalarType kBf16 = ScalarType::kBFloat16;
  constexpr int64_t kRows = 4, kDim = kN / kRows;
  AsyncCpuDevice device(NoPauses(), /*low_precision_storage=*/true);
  Buffer rows16(device.allocator(), kN, MemoryCategory::kActivations, kBf16);
  Buffer out16(device.allocator(), kN, MemoryCategory::kActivations, kBf16);
  Buffer w16(device.allocator(), kDim, MemoryCategory::kParameters, kBf16);
  Buffer w32(device.allocator(), kDim, MemoryCategory::kParameters);
  Buffer rstd(device.allocator(), kRows, MemoryCategory::kActivations);
  device.RmsNormForward(rows16.ref(), w16.ref(), kRows, kDim, 1e-6f, out16.ref(), rstd.data());
  device.RmsNormForward(rows16.ref(), w32.ref(), kRows, kDim, 1e-6f, out16.ref(), rstd.data());
  ASSERT_TRUE(device.Synchronize().ok()) << device.status();

  Buffer rows32(device.allocator(), kN, MemoryCategory::kActivations);
  Buffer out32(device.allocator(), kN, MemoryCategory::kActivations);
  device.RmsNormForward(rows32.ref(), w16.ref(), kRows, kDim, 1e-6f, out32.ref(), rstd.data());
  const absl::Status refused = device.Synchronize();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInternal);
  EXPECT_NE(
      refused.message().find("RmsNormForward: weights stored in BF16 for rows stored in FP32"),
      std::string::npos)
      << refused;
}

}  // namespace
}  // namespace shardwise::testing
