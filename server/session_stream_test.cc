// SessionStream over a real gRPC server, a real state file and the real controller: a
// worker daemon that heartbeats but reads nothing is declared lost once a message has
// waited on it past the unread timeout (on an injected clock), and its stream ends
// although the write to it never completed; a stream that says no hello is ended when
// SilentSessions finds it overdue, and one that starts with another message is refused;
// one that ends before its session is opened has that session closed after it.

#include "server/session_stream.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/testing/local_grpc.h"
#include "common/testing/scratch.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/worker_service.grpc.pb.h"
#include "server/testing/coordinator_core.h"

namespace shardwise {
namespace {

// WorkerService with Session alone.
class SessionOnly final : public v1::WorkerService::CallbackService {
 public:
  SessionOnly(JobController* controller, SerialExecutor* executor, SilentSessions* silent)
      : controller_(controller), executor_(executor), silent_(silent) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Session(
      grpc::CallbackServerContext* context) override {
    return SessionStream::Start(context, controller_, executor_, nullptr, AllowedWorkerNames::Any(),
                                silent_);
  }

 private:
  JobController* const controller_;
  SerialExecutor* const executor_;
  SilentSessions* const silent_;
};

// A real state file, the real controller and a real gRPC server of sessions, on a
// simulated clock.
class SessionStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::ScratchPath("session.db");
    unlink(path.c_str());
    JobController::Options options;
    options.check_paths = false;
    options.heartbeat_interval = absl::Seconds(1);
    options.heartbeat_timeout = absl::Seconds(10);
    auto core = testing::OpenCoordinatorCore(path, {.clock = &clock_, .controller = options});
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    service_ = std::make_unique<SessionOnly>(core_.controller.get(), &executor_, &silent_);
    server_ = testing::StartLocalServer(service_.get(), &port_);
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    executor_.Shutdown();
  }

  // A daemon whose reader is stuck: registered as w0, it says hello and never reads,
  // with a window that does not grow. The deadline turns a stream that never ends into a
  // failure.
  struct StuckWorker {
    std::unique_ptr<v1::WorkerService::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;
  };
  // Registers w0 (naming the attempt it runs, if any), as its daemon does first.
  void RegisterW0(const v1::RunningAttempt* running = nullptr) {
    v1::RegisterWorkerRequest registration;
    registration.set_name("w0");
    registration.set_device(v1::CPU);
    if (running != nullptr) *registration.mutable_running() = *running;
    ASSERT_TRUE(core_.controller->RegisterWorker(registration).ok());
  }
  // A client of the sessions over a channel with gRPC's own window.
  std::unique_ptr<v1::WorkerService::Stub> SessionsStub() const {
    return v1::WorkerService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  }

  void StartStuckWorker(StuckWorker* worker) {
    ASSERT_NO_FATAL_FAILURE(RegisterW0());
    worker->stub = v1::WorkerService::NewStub(testing::FixedWindowChannel(port_));
    worker->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    worker->stream = worker->stub->Session(&worker->context);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id("w0");
    ASSERT_TRUE(worker->stream->Write(hello));
    ASSERT_TRUE(testing::WaitFor([&] { return core_.workers->Get("w0")->state() == v1::IDLE; }));
  }

  // Sends w0 a message larger than HTTP/2's window: its write waits for a reader.
  void HoldTheWriter() {
    v1::CoordinatorMessage large;
    large.mutable_abort()->set_reason(std::string(size_t{4} << 20, 'x'));
    ASSERT_TRUE(core_.workers->Send("w0", large));
  }
  // The stuck worker's stream ended without the write: reading now finds no message and
  // the end.
  static void ExpectEndedWithoutTheWrite(StuckWorker* worker) {
    worker->stream->WritesDone();
    v1::CoordinatorMessage message;
    while (worker->stream->Read(&message)) {
      ADD_FAILURE() << "a message after the session was closed (" << message.ByteSizeLong()
                    << " bytes)";
    }
    const grpc::Status status = worker->stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  }

  SimulatedClock clock_;
  testing::CoordinatorCore core_;
  SerialExecutor executor_;
  SilentSessions silent_{absl::Seconds(30), &clock_};
  std::unique_ptr<SessionOnly> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(SessionStreamTest, AWorkerThatReadsNothingIsLostAndItsStreamEnds) {
  StuckWorker worker;
  ASSERT_NO_FATAL_FAILURE(StartStuckWorker(&worker));
  ASSERT_NO_FATAL_FAILURE(HoldTheWriter());
  // Time passes; the worker heartbeats on, and its write waits.
  EXPECT_TRUE(testing::WaitFor([&] {
    clock_.Advance(absl::Seconds(1));
    core_.controller->OnHeartbeat("w0", v1::Heartbeat());
    core_.controller->CheckHeartbeats();
    return core_.workers->Get("w0")->state() == v1::LOST;
  }));
  EXPECT_EQ(core_.workers->Get("w0")->lost_reason(),
            "it read none of the coordinator's messages for more than 30s (its daemon's "
            "session reader is stuck)");
  ExpectEndedWithoutTheWrite(&worker);
}

// A worker that reads nothing while it claims it read everything (its heartbeats' count
// keeps the unread check quiet) is lost once kMaxQueuedMessages wait for it, and its
// stream ends: the queue does not grow without end.
TEST_F(SessionStreamTest, AWorkerThatLeavesTooManyMessagesQueuedIsLost) {
  StuckWorker worker;
  ASSERT_NO_FATAL_FAILURE(StartStuckWorker(&worker));
  ASSERT_NO_FATAL_FAILURE(HoldTheWriter());
  v1::CoordinatorMessage small;
  small.mutable_abort()->set_job_id("job-1");
  for (size_t i = 1; i < SessionOutbox::kMaxQueuedMessages; ++i) {
    ASSERT_TRUE(core_.workers->Send("w0", small)) << i;
  }
  EXPECT_FALSE(core_.workers->Send("w0", small));
  ASSERT_TRUE(testing::WaitFor([&] { return core_.workers->Get("w0")->state() == v1::LOST; }));
  EXPECT_EQ(core_.workers->Get("w0")->lost_reason(),
            "it left 4096 of the coordinator's messages unread (its daemon's session reader is "
            "stuck)");
  ExpectEndedWithoutTheWrite(&worker);
}

// A stream that says nothing is ended once its hello is overdue; one that said hello in
// time is left open (its heartbeats and messages watch it from then on).
TEST_F(SessionStreamTest, AStreamThatSendsNoHelloIsEndedWhenItIsOverdue) {
  ASSERT_NO_FATAL_FAILURE(RegisterW0());
  auto stub = SessionsStub();
  grpc::ClientContext silent_context;
  silent_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto silent = stub->Session(&silent_context);
  grpc::ClientContext greeting_context;
  greeting_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto greeting = stub->Session(&greeting_context);
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w0");
  ASSERT_TRUE(greeting->Write(hello));
  ASSERT_TRUE(testing::WaitFor([&] { return silent_.waiting() == 2; }));
  ASSERT_TRUE(testing::WaitFor([&] { return core_.workers->Get("w0")->state() == v1::IDLE; }));

  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ(silent_.EndOverdue(), 0);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(silent_.EndOverdue(), 1);

  v1::CoordinatorMessage message;
  EXPECT_FALSE(silent->Read(&message));
  const grpc::Status status = silent->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(),
            "no hello within 30s of the session's start: a worker's first session message is "
            "its hello");
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::IDLE);  // the greeting's session runs on
  greeting->WritesDone();
  while (greeting->Read(&message)) {
  }
  EXPECT_TRUE(greeting->Finish().ok());
}

// A session whose first message is not a hello (a heartbeat sent before it, as a racing
// daemon would) is refused, and the refusal says what came instead.
TEST_F(SessionStreamTest, AFirstMessageOtherThanAHelloIsRefusedByItsKind) {
  auto stub = SessionsStub();
  const auto refusal = [&](const v1::WorkerMessage& first) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub->Session(&context);
    stream->Write(first);  // may fail once the coordinator has refused: Finish says why
    v1::CoordinatorMessage message;
    while (stream->Read(&message)) {
    }
    return stream->Finish();
  };
  v1::WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat();
  grpc::Status status = refusal(heartbeat);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "the first session message must be a hello with a worker_id; got a heartbeat");
  v1::WorkerMessage empty_hello;
  empty_hello.mutable_hello();
  status = refusal(empty_hello);
  EXPECT_EQ(status.error_message(),
            "the first session message must be a hello with a worker_id; got a hello with an "
            "empty worker_id");
  status = refusal(v1::WorkerMessage());
  EXPECT_EQ(status.error_message(),
            "the first session message must be a hello with a worker_id; got a message of a "
            "kind this coordinator does not know");
}

// A stream that ends after its hello but before the controller has opened the session
// (the worker gone while the coordinator was busy), whose opening writes to the worker
// (an abort it is owed: it names an attempt the coordinator does not run): the write
// fails and ends the stream, maybe before the opening returns, and the session is closed
// all the same. The worker is lost at once (the simulated clock never moves), not kept
// with a session that has ended until its heartbeats are missed.
TEST_F(SessionStreamTest, AStreamThatEndsAsItsSessionOpensIsClosed) {
  v1::RunningAttempt unknown;
  unknown.set_job_id("job-9");
  unknown.set_attempt(1);
  ASSERT_NO_FATAL_FAILURE(RegisterW0(&unknown));
  absl::Notification busy, release;
  executor_.Post([&] {
    busy.Notify();
    release.WaitForNotification();
  });
  busy.WaitForNotification();
  auto stub = SessionsStub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->Session(&context);
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w0");
  ASSERT_TRUE(stream->Write(hello));
  const bool queued = testing::WaitFor([&] { return executor_.queued() == 1; });  // OpenSession
  context.TryCancel();
  release.Notify();
  ASSERT_TRUE(queued);
  // LOST from its registration until its session opens: the reason tells the two apart.
  EXPECT_TRUE(testing::WaitFor([&] {
    return core_.workers->Get("w0")->lost_reason() == "its session closed";
  })) << core_.workers->Get("w0")->DebugString();
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::LOST);
  stream->Finish();
}

}  // namespace
}  // namespace shardwise
