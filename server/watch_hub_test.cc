// WatchHub over a real gRPC server and a real state file: a watcher that stops reading
// is cancelled once its write has waited past the write timeout (on an injected clock),
// and its slot is free again; a watcher that reads is not.

#include "server/watch_hub.h"

#include <unistd.h>

#include <memory>
#include <string>

#include "common/testing/local_grpc.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "proto/job_service.grpc.pb.h"
#include "server/state_store.h"

namespace shardwise {
namespace {

// A watch the hub refused, ended with its status.
class Refused final : public grpc::ServerWriteReactor<v1::Job> {
 public:
  explicit Refused(const absl::Status& status) {
    Finish(
        grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message())));
  }
  void OnDone() override { delete this; }
};

// JobService with WatchJob alone, served by the hub.
class WatchOnly final : public v1::JobService::CallbackService {
 public:
  explicit WatchOnly(WatchHub* hub) : hub_(hub) {}
  grpc::ServerWriteReactor<v1::Job>* WatchJob(grpc::CallbackServerContext* context,
                                              const v1::WatchJobRequest* request) override {
    auto watch = hub_->Watch(request->job_id(), "alice", nullptr, context);
    if (!watch.ok()) return new Refused(watch.status());
    return *watch;
  }

 private:
  WatchHub* const hub_;
};

TEST(WatchHub, AWatcherThatStopsReadingIsCancelledAfterTheWriteTimeout) {
  const std::string path = testing::ScratchPath("watch.db");
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
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::StartLocalServer(&service, &port);
  ASSERT_NE(server, nullptr);

  // A client that never reads, with a window that does not grow.
  auto stub = v1::JobService::NewStub(testing::FixedWindowChannel(port));
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
  ASSERT_TRUE(testing::WaitFor([&] { return hub.watches() == 2; }));

  // Time passes on the hub's clock until the write it started waits past the timeout
  // (advanced again while looking: the write may start after the first advance).
  EXPECT_TRUE(testing::WaitFor([&] {
    clock.Advance(kTimeout);
    return hub.watches() == 1;
  })) << "the stalled watch still holds its slot";
  // Its client finds the call cancelled, without the update; alice's slot takes a new
  // watch (she may hold two).
  v1::Job update;
  while (stream->Read(&update)) ADD_FAILURE() << "the stalled update arrived after all";
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  grpc::ClientContext again_context;
  request.set_job_id(small->id());
  auto again = stub->WatchJob(&again_context, request);
  EXPECT_TRUE(again->Read(&update)) << again->Finish().error_message();
  // The reader's stream lives on: it gets the small job's next version.
  ASSERT_TRUE((*jobs)->Cancel(small->id(), "by the test").ok());
  ASSERT_TRUE(reader->Read(&seen));
  EXPECT_EQ(seen.state(), v1::CANCELLED);
  again_context.TryCancel();
  reader_context.TryCancel();
  server->Shutdown();
  hub.Shutdown();
}

}  // namespace
}  // namespace shardwise
