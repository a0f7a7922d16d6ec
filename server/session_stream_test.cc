// SessionStream over a real gRPC server, a real state file and the real controller: a
// worker daemon that heartbeats but reads nothing is declared lost once a message has
// waited on it past the unread timeout (on an injected clock), and its stream ends
// although the write to it never completed.

#include "server/session_stream.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/testing/local_grpc.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "proto/worker_service.grpc.pb.h"
#include "server/state_store.h"

namespace shardwise {
namespace {

// WorkerService with Session alone.
class SessionOnly final : public v1::WorkerService::CallbackService {
 public:
  SessionOnly(JobController* controller, SerialExecutor* executor)
      : controller_(controller), executor_(executor) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Session(
      grpc::CallbackServerContext* context) override {
    return SessionStream::Start(context, controller_, executor_, nullptr);
  }

 private:
  JobController* const controller_;
  SerialExecutor* const executor_;
};

TEST(SessionStream, AWorkerThatReadsNothingIsLostAndItsStreamEnds) {
  const std::string path = testing::ScratchPath("session.db");
  unlink(path.c_str());
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  SimulatedClock clock;
  auto jobs = JobManager::Create(store->get(), {.clock = &clock});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  WorkerRegistry workers({.clock = &clock});
  RendezvousStore rendezvous;
  JobController::Options options;
  options.check_paths = false;
  options.clock = &clock;
  options.heartbeat_interval = absl::Seconds(1);
  options.heartbeat_timeout = absl::Seconds(10);
  JobController controller(jobs->get(), &workers, &rendezvous, options);
  SerialExecutor executor;
  SessionOnly service(&controller, &executor);
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::StartLocalServer(&service, &port);
  ASSERT_NE(server, nullptr);

  v1::RegisterWorkerRequest registration;
  registration.set_name("w0");
  registration.set_device(v1::CPU);
  ASSERT_TRUE(controller.RegisterWorker(registration).ok());
  // A daemon whose reader is stuck: it says hello and never reads, with a window that
  // does not grow. The deadline turns a stream that never ends into a failure.
  auto stub = v1::WorkerService::NewStub(testing::FixedWindowChannel(port));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->Session(&context);
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w0");
  ASSERT_TRUE(stream->Write(hello));
  ASSERT_TRUE(testing::WaitFor([&] { return workers.Get("w0")->state() == v1::IDLE; }));

  // A message larger than HTTP/2's window: its write waits for a reader.
  v1::CoordinatorMessage large;
  large.mutable_abort()->set_reason(std::string(size_t{4} << 20, 'x'));
  ASSERT_TRUE(workers.Send("w0", large));
  // Time passes; the worker heartbeats on, and its write waits.
  EXPECT_TRUE(testing::WaitFor([&] {
    clock.Advance(absl::Seconds(1));
    controller.OnHeartbeat("w0", v1::Heartbeat());
    controller.CheckHeartbeats();
    return workers.Get("w0")->state() == v1::LOST;
  }));
  EXPECT_EQ(workers.Get("w0")->lost_reason(),
            "it read none of the coordinator's messages for more than 30s (its daemon's "
            "session reader is stuck)");

  // Its stream ended without the write: reading now finds no message and the end.
  stream->WritesDone();
  v1::CoordinatorMessage message;
  while (stream->Read(&message)) {
    ADD_FAILURE() << "a message after the session was closed (" << message.ByteSizeLong()
                  << " bytes)";
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  server->Shutdown();
  executor.Shutdown();
}

}  // namespace
}  // namespace shardwise
