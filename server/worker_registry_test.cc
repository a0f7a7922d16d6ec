#include "server/worker_registry.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::RegisterWorkerRequest Request(const std::string& name) {
  v1::RegisterWorkerRequest request;
  request.set_name(name);
  request.set_device(v1::CPU);
  request.set_cpu_threads(8);
  return request;
}

TEST(WorkerRegistry, AWorkerIsSchedulableOnlyWithALiveSession) {
  WorkerRegistry registry;
  const std::string id = registry.Register(Request("w0")).worker_id;
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  auto outbox = registry.AttachSession(id);
  ASSERT_TRUE(outbox.ok());
  ASSERT_EQ(registry.Idle(v1::CPU).size(), 1u);
  EXPECT_TRUE(registry.Idle(v1::CUDA).empty());
  EXPECT_TRUE(registry.DetachSession(id, *outbox));
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  EXPECT_EQ(registry.AttachSession("nobody").status().code(), absl::StatusCode::kNotFound);
}

TEST(WorkerRegistry, ANewSessionReplacesTheOldOne) {
  WorkerRegistry registry;
  const std::string id = registry.Register(Request("w0")).worker_id;
  auto first = registry.AttachSession(id);
  auto second = registry.AttachSession(id);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE((*first)->closed());
  // The old session ending later must not take the worker down.
  EXPECT_FALSE(registry.DetachSession(id, *first));
  v1::CoordinatorMessage message;
  message.mutable_abort()->set_job_id("j");
  EXPECT_TRUE(registry.Send(id, message));
  auto received = (*second)->Pop(absl::Milliseconds(10));
  ASSERT_TRUE(received.has_value());
  EXPECT_EQ(received->abort().job_id(), "j");
}

TEST(WorkerRegistry, TracksAssignmentsAndSilence) {
  WorkerRegistry registry;
  const std::string id = registry.Register(Request("w0")).worker_id;
  ASSERT_TRUE(registry.AttachSession(id).ok());
  registry.SetBusy(id, "job-1", 2, 3);
  auto worker = registry.Get(id);
  EXPECT_EQ(worker->state(), v1::BUSY);
  EXPECT_EQ(worker->job_id(), "job-1");
  EXPECT_EQ(worker->rank(), 3);
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());

  EXPECT_TRUE(registry.Silent(absl::Now(), absl::Seconds(5)).empty());
  EXPECT_EQ(registry.Silent(absl::Now() + absl::Seconds(6), absl::Seconds(5)),
            std::vector<std::string>{id});
  auto before = registry.MarkLost(id, "no heartbeat");
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->state(), v1::BUSY);
  EXPECT_EQ(registry.Get(id)->state(), v1::LOST);
  EXPECT_EQ(registry.Get(id)->lost_reason(), "no heartbeat");
  // Lost workers are not reported silent again.
  EXPECT_TRUE(registry.Silent(absl::Now() + absl::Seconds(60), absl::Seconds(5)).empty());
}

TEST(WorkerRegistry, ReRegistrationReportsThePreviousState) {
  WorkerRegistry registry;
  const std::string id = registry.Register(Request("w0")).worker_id;
  ASSERT_TRUE(registry.AttachSession(id).ok());
  registry.SetBusy(id, "job-1", 1, 0);
  auto again = registry.Register(Request("w0"));
  EXPECT_EQ(again.worker_id, id);
  EXPECT_EQ(again.previous.state(), v1::BUSY);
  EXPECT_EQ(again.previous.job_id(), "job-1");
  EXPECT_EQ(registry.List().size(), 1u);
}

TEST(WorkerRegistry, KeepsTheGpuACudaWorkerAdvertises) {
  WorkerRegistry registry;
  v1::RegisterWorkerRequest request = Request("gpu0");
  request.set_device(v1::CUDA);
  request.mutable_gpu()->set_name("NVIDIA H100 80GB HBM3");
  request.mutable_gpu()->set_memory_bytes(int64_t{85} << 30);
  request.mutable_gpu()->set_compute_capability_major(9);
  request.mutable_gpu()->set_nccl_version("2.28.3");
  const std::string id = registry.Register(request).worker_id;
  auto outbox = registry.AttachSession(id);
  ASSERT_TRUE(outbox.ok());
  ASSERT_EQ(registry.Idle(v1::CUDA).size(), 1u);
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  const v1::WorkerInfo info = registry.Idle(v1::CUDA)[0];
  EXPECT_EQ(info.gpu().name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info.gpu().compute_capability_major(), 9);
  // Re-registered as a CPU worker: the GPU is gone.
  registry.Register(Request("gpu0"));
  EXPECT_FALSE(registry.List()[0].has_gpu());
}

}  // namespace
}  // namespace shardwise
