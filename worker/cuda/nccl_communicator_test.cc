// NCCL on the one GPU of the test machine: every collective and type at world size 1
// (NCCL refuses two ranks on one GPU; several ranks per GPU go through the host-staged
// path), grouping, and the watchdog: a peer that never comes, and an abort from another
// thread, both end in errors within their deadlines instead of hangs. Stream-ordered
// collectives return while their stream is still held, and are watched to completion.

#include "worker/cuda/nccl_communicator.h"

#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

using ::shardwise::cuda::testing::DeviceVector;

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    auto stream = Stream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }
  Stream stream_;
  gloo::rendezvous::HashStore store_;
};

TEST_F(NcclCommunicatorTest, WorldOfOneRunsEveryCollectiveInEveryType) {
  auto comm = NcclCommunicator::Connect(store_, "solo", 0, 1, stream_.get());
  ASSERT_TRUE(comm.ok()) << comm.status();
  NcclCommunicator& c = **comm;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  const size_t n = 1001;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) * 0.5f;
  DeviceVector<float> in(values), out(n);
  ASSERT_TRUE(c.AllGather(in.get(), n, out.get()).ok());
  EXPECT_EQ(out.ToHost(), values);
  ASSERT_TRUE(c.ReduceScatter(in.get(), n, out.get()).ok());
  EXPECT_EQ(out.ToHost(), values);
  ASSERT_TRUE(c.AllReduce(in.get(), n).ok());
  EXPECT_EQ(in.ToHost(), values);
  ASSERT_TRUE(c.Broadcast(in.get(), n, 0).ok());
  ASSERT_TRUE(c.Barrier().ok());

  // 16-bit types move their bit patterns unchanged; INT64 too.
  std::vector<uint16_t> bits(n);
  for (size_t i = 0; i < n; ++i) bits[i] = static_cast<uint16_t>(0x3c00 + i);
  for (ScalarType type : {ScalarType::kFloat16, ScalarType::kBFloat16}) {
    DeviceVector<uint16_t> b(bits), g(n);
    ASSERT_TRUE(c.AllGather(b.get(), n, g.get(), type).ok());
    EXPECT_EQ(g.ToHost(), bits) << ScalarTypeName(type);
  }
  std::vector<int64_t> counts = {1, 2, int64_t{1} << 40};
  DeviceVector<int64_t> dcounts(counts);
  ASSERT_TRUE(c.AllReduce(dcounts.get(), counts.size(), ScalarType::kInt64).ok());
  EXPECT_EQ(dcounts.ToHost(), counts);

  EXPECT_EQ(c.stats().all_gather_bytes, static_cast<int64_t>(n * 4 + 2 * n * 2));

  // Two collectives launched as one group, waited for once.
  DeviceVector<float> a(values), b(values);
  ASSERT_TRUE(c.Grouped([&] {
                 absl::Status s = c.AllReduce(a.get(), n);
                 if (!s.ok()) return s;
                 return c.AllReduce(b.get(), n);
               }).ok());
  EXPECT_EQ(b.ToHost(), values);
}

TEST_F(NcclCommunicatorTest, ACollectiveOnItsOwnStreamFollowsTheCallersStream) {
  auto comm_stream = Stream::Create();
  ASSERT_TRUE(comm_stream.ok());
  NcclOptions options;
  const cudaStream_t caller = stream_.get();
  options.stream_of_caller = [caller] { return caller; };
  auto comm = NcclCommunicator::Connect(store_, "follow", 0, 1, comm_stream->get(), options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  // The caller's stream writes 64 MiB, and the collective (on the other stream) must see
  // every byte of it: it waits for the caller's stream first.
  const size_t n = size_t{16} << 20;
  DeviceVector<float> data(n), out(n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // their zero fills are done
  ASSERT_EQ(cudaMemsetAsync(data.get(), 0x3f, n * sizeof(float), caller), cudaSuccess);
  ASSERT_TRUE((*comm)->AllGather(data.get(), n, out.get()).ok());
  const std::vector<float> got = out.ToHost();
  uint32_t bits = 0;
  std::memcpy(&bits, &got[n - 1], sizeof(bits));
  EXPECT_EQ(bits, 0x3f3f3f3fu);
  std::memcpy(&bits, &got[0], sizeof(bits));
  EXPECT_EQ(bits, 0x3f3f3f3fu);
}

TEST_F(NcclCommunicatorTest, APeerThatNeverJoinsEndsInDeadlineExceeded) {
  NcclOptions options;
  options.timeout = absl::Seconds(3);
  const absl::Time start = absl::Now();
  // Rank 0 of 2; rank 1 never comes.
  auto comm = NcclCommunicator::Connect(store_, "pair", 0, 2, stream_.get(), options);
  const absl::Duration waited = absl::Now() - start;
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_NE(comm.status().message().find("rank 0 of 2"), std::string::npos) << comm.status();
  EXPECT_LT(waited, absl::Seconds(20));
  // The device is usable afterwards.
  DeviceVector<float> after(std::vector<float>{1, 2, 3});
  EXPECT_EQ(after.ToHost(), (std::vector<float>{1, 2, 3}));
}

TEST_F(NcclCommunicatorTest, AbortFromAnotherThreadStopsTheCommunicator) {
  auto comm = NcclCommunicator::Connect(store_, "aborted", 0, 1, stream_.get());
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::thread aborter([&] { (*comm)->Abort("job job-7 was cancelled"); });
  aborter.join();
  DeviceVector<float> data(std::vector<float>(64, 1.0f));
  const absl::Status first = (*comm)->AllReduce(data.get(), 64);
  EXPECT_EQ(first.code(), absl::StatusCode::kAborted) << first;
  EXPECT_NE(first.message().find("job job-7 was cancelled"), std::string::npos) << first;
  // Sticky: later collectives fail the same way, at once.
  EXPECT_EQ((*comm)->Barrier().code(), absl::StatusCode::kAborted);
}

// Holds a stream in a host function until opened (at most 30 s), so a test can tell a
// call that returns at once from one that waits for the stream.
struct StreamGate {
  absl::Notification open;
  bool opened_in_time = false;
  cudaError_t Hold(cudaStream_t stream) {
    return cudaLaunchHostFunc(
        stream,
        [](void* gate) {
          auto* self = static_cast<StreamGate*>(gate);
          self->opened_in_time = self->open.WaitForNotificationWithTimeout(absl::Seconds(30));
        },
        this);
  }
};

TEST_F(NcclCommunicatorTest, AStreamOrderedCollectiveReturnsOnceEnqueued) {
  NcclOptions options;
  options.stream_ordered = true;
  auto comm = NcclCommunicator::Connect(store_, "ordered", 0, 1, stream_.get(), options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_TRUE((*comm)->stream_ordered());
  const size_t n = 4099;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) - 7.0f;
  DeviceVector<float> in(values), out(n);  // before the gate: their copies are synchronous
  StreamGate gate;
  ASSERT_EQ(gate.Hold(stream_.get()), cudaSuccess);
  // Returns while the gate holds the stream: were it to wait for the collective, the gate
  // would time out unopened.
  ASSERT_TRUE((*comm)->AllGather(in.get(), n, out.get()).ok());
  gate.open.Notify();
  ASSERT_TRUE((*comm)->WaitForCompletion().ok());
  EXPECT_TRUE(gate.opened_in_time);
  EXPECT_EQ(out.ToHost(), values);
  EXPECT_TRUE((*comm)->WaitForCompletion().ok());  // nothing pending: at once
}

// On a stream of its own (HYBRID's all-reduce lane), a stream-ordered collective returns
// at once, and the caller's stream waits for it on the device: a copy of its result queued
// on the caller's stream while the collective's stream is held sees the result.
TEST_F(NcclCommunicatorTest, TheCallersStreamWaitsForAStreamOrderedCollectiveOnAnother) {
  auto comm_stream = Stream::Create();
  ASSERT_TRUE(comm_stream.ok());
  NcclOptions options;
  options.stream_ordered = true;
  const cudaStream_t caller = stream_.get();
  options.stream_of_caller = [caller] { return caller; };
  auto comm =
      NcclCommunicator::Connect(store_, "ordered-follow", 0, 1, comm_stream->get(), options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const size_t n = 4099;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) * 0.5f;
  DeviceVector<float> in(values), out(n), copy(n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // their fills are done
  StreamGate gate;
  ASSERT_EQ(gate.Hold(comm_stream->get()), cudaSuccess);
  ASSERT_TRUE((*comm)->AllGather(in.get(), n, out.get()).ok());
  ASSERT_EQ(
      cudaMemcpyAsync(copy.get(), out.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, caller),
      cudaSuccess);
  gate.open.Notify();
  ASSERT_EQ(cudaStreamSynchronize(caller), cudaSuccess);
  EXPECT_TRUE(gate.opened_in_time);
  EXPECT_EQ(copy.ToHost(), values);
  EXPECT_TRUE((*comm)->WaitForCompletion().ok());
}

TEST_F(NcclCommunicatorTest, AnAbortReachesTheWaitForAStreamOrderedCollective) {
  NcclOptions options;
  options.stream_ordered = true;
  auto comm = NcclCommunicator::Connect(store_, "ordered-abort", 0, 1, stream_.get(), options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceVector<float> in(std::vector<float>(64, 1.0f)), out(64);
  StreamGate gate;
  ASSERT_EQ(gate.Hold(stream_.get()), cudaSuccess);
  ASSERT_TRUE((*comm)->AllGather(in.get(), 64, out.get()).ok());
  // The abort (ncclCommAbort, on the aborting thread) may wait for the collective queued
  // behind the gate: the gate opens meanwhile.
  std::thread aborter([&] { (*comm)->Abort("job job-9 was cancelled"); });
  gate.open.Notify();
  aborter.join();
  const absl::Status waited = (*comm)->WaitForCompletion();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_NE(waited.message().find("job job-9 was cancelled"), std::string::npos) << waited;
  EXPECT_EQ((*comm)->WaitForCompletion().code(), absl::StatusCode::kAborted);  // sticky
  EXPECT_EQ((*comm)->AllGather(in.get(), 64, out.get()).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(cudaStreamSynchronize(stream_.get()), cudaSuccess);
}

// The owner blocked where it polls nothing (a stream synchronisation, as behind a
// collective whose peer is gone): the abort runs ncclCommAbort on the aborting thread at
// once, not at the owner's next poll. Here the stream's gate opens only from the abort
// (or after 30 s), so an abort that waited for the owner leaves the gate to time out.
StreamGate* abort_gate = nullptr;
std::thread::id aborted_on;

ncclResult_t AbortOpeningTheGate(ncclComm_t comm) {
  aborted_on = std::this_thread::get_id();
  abort_gate->open.Notify();
  return ncclCommAbort(comm);
}

TEST_F(NcclCommunicatorTest, AnAbortDoesNotWaitForTheOwnerToPoll) {
  NcclOptions options;
  options.stream_ordered = true;
  options.abort_function = &AbortOpeningTheGate;
  auto comm = NcclCommunicator::Connect(store_, "abort-now", 0, 1, stream_.get(), options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceVector<float> in(std::vector<float>(64, 1.0f)), out(64);
  StreamGate gate;
  abort_gate = &gate;
  ASSERT_EQ(gate.Hold(stream_.get()), cudaSuccess);
  ASSERT_TRUE((*comm)->AllGather(in.get(), 64, out.get()).ok());
  std::thread aborter([&] { (*comm)->Abort("job job-11 was cancelled"); });
  const std::thread::id aborter_id = aborter.get_id();
  EXPECT_EQ(cudaStreamSynchronize(stream_.get()), cudaSuccess);  // the owner, blocked
  aborter.join();
  EXPECT_TRUE(gate.opened_in_time) << "the abort waited for the owner to poll";
  EXPECT_EQ(aborted_on, aborter_id);
  const absl::Status waited = (*comm)->WaitForCompletion();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_NE(waited.message().find("job job-11 was cancelled"), std::string::npos) << waited;
  abort_gate = nullptr;
}

TEST_F(NcclCommunicatorTest, RejectsARankOutsideTheGroup) {
  auto comm = NcclCommunicator::Connect(store_, "bad", 2, 2, stream_.get());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(comm.status().message().find("rank 2"), std::string::npos) << comm.status();
}

}  // namespace
}  // namespace shardwise::cuda
