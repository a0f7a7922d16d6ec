// WatchHub over a real gRPC server and a real state file: a watcher that stops reading
// is cancelled once its write has waited past the write timeout (on an injected clock),
// and its slot is free again; a watcher that reads is not.

#include "server/watch_hub.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "grpcpp/create_channel.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/job_service.grpc.pb.h"
#include "server/state_store.h"

namespace shardwise {
namespace {

// JobService with WatchJob alone, served by the hub.
class WatchOnly final : public v1::JobService::CallbackService {
 public:
  explicit WatchOnly(WatchHub* hub) : hub_(hub) {}
  grpc::ServerWriteReactor<v1::Job>* WatchJob(grpc::CallbackServerContext* context,
                                              const v1::WatchJobRequest* request) override {
    auto watch = hub_->Watch(request->job_id(), "alice", nullptr, context);
    EXPECT_TRUE(watch.ok()) << watch.status();
    return *watch;
  }

 private:
  WatchHub* const hub_;
};

// Polls `done` for up to 30 s of real time, every 10 ms.
bool WaitFor(const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(WatchHub, AWatcherThatStopsReadingIsCancelledAfterTheWriteTimeout) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir ? dir : "/tmp") + "/watch-" + std::to_string(getpid()) + ".db";
  unlink(path.c_str());
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto jobs = JobManager::Create(store->get(), JobManager::Options{});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  // A version larger than HTTP/2's window: its write waits for a client that reads.
  v1::JobSpec spec;
  spec.set_world_size(1);
  spec.set_steps(1);
  spec.set_name(std::string(size_t{4} << 20, 'x'));
  auto job = (*jobs)->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  spec.set_name("small");
  auto small = (*jobs)->Submit(spec);
  ASSERT_TRUE(small.ok()) << small.status();

  SimulatedClock clock;
  constexpr absl::Duration kTimeout = absl::Seconds(60);
  WatchHub hub(jobs->get(), 10, 2, kTimeout, &clock);
  WatchOnly service(&hub);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  // A client that never reads, with a window that does not grow.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::JobService::NewStub(channel);
  // A reader of the small job, whose first version it has read.
  grpc::ClientContext reader_context;
  v1::WatchJobRequest request;
  request.set_job_id(small->id());
  auto reader = stub->WatchJob(&reader_context, request);
  v1::Job seen;
  ASSERT_TRUE(reader->Read(&seen));
  grpc::ClientContext context;
  request.set_job_id(job->id());
  auto stream = stub->WatchJob(&context, request);
  ASSERT_TRUE(WaitFor([&] { return hub.watches() == 2; }));

  // Time passes on the hub's clock until the write it started waits past the timeout
  // (advanced again while looking: the write may start after the first advance).
  EXPECT_TRUE(WaitFor([&] {
    clock.Advance(kTimeout);
    return hub.watches() == 1;
  })) << "the stalled watch still holds its slot";
  // The reader's stream lives on: it gets the small job's next version.
  ASSERT_TRUE((*jobs)->Cancel(small->id(), "by the test").ok());
  ASSERT_TRUE(reader->Read(&seen));
  EXPECT_EQ(seen.state(), v1::CANCELLED);
  context.TryCancel();
  reader_context.TryCancel();
  server->Shutdown();
  hub.Shutdown();
}

}  // namespace
}  // namespace shardwise
