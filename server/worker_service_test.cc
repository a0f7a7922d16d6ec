// WorkerServiceImpl over a real gRPC server with the real controller and state file:
// registrations wait for the executor in a bounded queue, and one past the bound is
// RESOURCE_EXHAUSTED at once (workers retry it) instead of growing the queue.

#include "server/worker_service.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/testing/local_grpc.h"
#include "common/testing/scratch.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/testing/coordinator_core.h"

namespace shardwise {
namespace {

grpc::Status Register(v1::WorkerService::Stub& stub, const std::string& name) {
  v1::RegisterWorkerRequest request;
  request.set_name(name);
  request.set_device(v1::CPU);
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub.RegisterWorker(&context, request, &response);
}

TEST(WorkerService, ARegistrationPastTheQueuesBoundIsRefusedAtOnce) {
  const std::string path = testing::ScratchPath("registrations.db");
  unlink(path.c_str());
  auto core = testing::OpenCoordinatorCore(path, {});
  ASSERT_TRUE(core.ok()) << core.status();
  SerialExecutor executor;
  WorkerServiceOptions service_options;
  service_options.max_queued_registrations = 1;
  WorkerServiceImpl service(core->controller.get(), &executor, nullptr, service_options);
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::StartLocalServer(&service, &port);
  ASSERT_NE(server, nullptr);
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

  // The executor is busy (a commit, say) until told; w0's registration waits behind it.
  absl::Notification busy;
  absl::Notification release;
  executor.Post([&] {
    busy.Notify();
    release.WaitForNotification();
  });
  busy.WaitForNotification();
  grpc::Status first;
  std::thread waiting([&] { first = Register(*stub, "w0"); });
  ASSERT_TRUE(testing::WaitFor([&] { return executor.queued() == 1; }));

  const grpc::Status refused = Register(*stub, "w1");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(),
            "1 registrations are waiting to be handled; retry (workers do)");

  release.Notify();
  waiting.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
  const grpc::Status retried = Register(*stub, "w1");  // room again
  EXPECT_TRUE(retried.ok()) << retried.error_message();
  // Registered (LOST until its session opens, which this test does not).
  EXPECT_TRUE(core->workers->Get("w1").ok()) << core->workers->Get("w1").status();
  server->Shutdown();
  executor.Shutdown();
}

}  // namespace
}  // namespace shardwise
