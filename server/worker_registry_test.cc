#include "server/worker_registry.h"

#include <limits>

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

std::string Register(WorkerRegistry& registry, const std::string& name) {
  auto registration = registry.Register(Request(name));
  EXPECT_TRUE(registration.ok()) << registration.status();
  return registration.ok() ? registration->worker_id : "";
}

std::shared_ptr<QueuedOutbox> Attach(WorkerRegistry& registry, const std::string& id,
                                     size_t buffered = std::numeric_limits<size_t>::max()) {
  auto outbox = std::make_shared<QueuedOutbox>(buffered);
  EXPECT_TRUE(registry.AttachSession(id, outbox).ok());
  return outbox;
}

TEST(WorkerRegistry, AWorkerIsSchedulableOnlyWithALiveSession) {
  WorkerRegistry registry;
  const std::string id = Register(registry, "w0");
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  auto outbox = Attach(registry, id);
  ASSERT_EQ(registry.Idle(v1::CPU).size(), 1u);
  EXPECT_TRUE(registry.Idle(v1::CUDA).empty());
  EXPECT_TRUE(registry.DetachSession(id, outbox));
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  EXPECT_EQ(registry.AttachSession("nobody", std::make_shared<QueuedOutbox>()).code(),
            absl::StatusCode::kNotFound);
}

// After a coordinator restart a worker re-attaches its running attempt as it registers:
// BUSY before its session opens, then no longer "registered; no session yet".
TEST(WorkerRegistry, AReattachedWorkersSessionClearsItsLostReason) {
  WorkerRegistry registry;
  const std::string id = Register(registry, "w0");
  EXPECT_EQ(registry.Get(id)->lost_reason(), "registered; no session yet");
  registry.SetBusy(id, "job-1", 1, 0);
  Attach(registry, id);
  EXPECT_EQ(registry.Get(id)->state(), v1::BUSY);
  EXPECT_EQ(registry.Get(id)->lost_reason(), "");
}

TEST(WorkerRegistry, ANewSessionReplacesTheOldOne) {
  WorkerRegistry registry;
  const std::string id = Register(registry, "w0");
  auto first = Attach(registry, id);
  auto second = Attach(registry, id);
  EXPECT_TRUE(first->closed());
  // The old session ending later must not take the worker down.
  EXPECT_FALSE(registry.DetachSession(id, first));
  v1::CoordinatorMessage message;
  message.mutable_abort()->set_job_id("j");
  EXPECT_TRUE(registry.Send(id, message));
  auto received = second->Pop();
  ASSERT_TRUE(received.has_value());
  EXPECT_EQ(received->abort().job_id(), "j");
}

TEST(WorkerRegistry, TracksAssignmentsAndSilence) {
  SimulatedClock clock;
  WorkerRegistry registry({.clock = &clock});
  const std::string id = Register(registry, "w0");
  Attach(registry, id);
  registry.SetBusy(id, "job-1", 2, 3);
  auto worker = registry.Get(id);
  EXPECT_EQ(worker->state(), v1::BUSY);
  EXPECT_EQ(worker->job_id(), "job-1");
  EXPECT_EQ(worker->rank(), 3);
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  auto heartbeat = registry.Heartbeat(id);
  ASSERT_TRUE(heartbeat.ok());
  EXPECT_EQ(heartbeat->state, v1::BUSY);
  EXPECT_EQ(heartbeat->job_id, "job-1");
  EXPECT_EQ(heartbeat->attempt, 2);

  clock.Advance(absl::Seconds(5));
  EXPECT_TRUE(registry.Silent(absl::Seconds(5)).empty());
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(registry.Silent(absl::Seconds(5)), std::vector<std::string>{id});
  auto before = registry.MarkLost(id, "no heartbeat");
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->state(), v1::BUSY);
  EXPECT_EQ(registry.Get(id)->state(), v1::LOST);
  EXPECT_EQ(registry.Get(id)->lost_reason(), "no heartbeat");
  // Lost workers are not reported silent again.
  clock.Advance(absl::Seconds(60));
  EXPECT_TRUE(registry.Silent(absl::Seconds(5)).empty());
}

// A worker that heartbeats but reads nothing is named once a message has waited for it
// past the bound; one that reads on, however slowly, or has nothing waiting, is not.
TEST(WorkerRegistry, NamesAWorkerThatReadsNothingWhileAMessageWaits) {
  SimulatedClock clock;
  WorkerRegistry registry({.clock = &clock});
  const std::string id = Register(registry, "w0");
  auto outbox = Attach(registry, id, /*buffered=*/1);  // the second message waits
  const absl::Duration bound = absl::Seconds(10);
  clock.Advance(absl::Seconds(60));
  EXPECT_TRUE(registry.Unread(bound).empty());  // nothing waits: idle is not unread

  v1::CoordinatorMessage message;
  message.mutable_abort()->set_job_id("j");
  ASSERT_TRUE(registry.Send(id, message));
  clock.Advance(bound * 2);
  EXPECT_TRUE(registry.Unread(bound).empty());  // one message fits the transport's window
  ASSERT_TRUE(registry.Send(id, message));
  EXPECT_TRUE(registry.Unread(bound).empty());  // the wait is seen from here
  clock.Advance(bound);
  ASSERT_TRUE(registry.Heartbeat(id).ok());  // heartbeats do not count as reading
  EXPECT_TRUE(registry.Unread(bound).empty());
  ASSERT_TRUE(outbox->Pop().has_value());  // it reads one, and another message waits
  ASSERT_TRUE(registry.Send(id, message));
  EXPECT_TRUE(registry.Unread(bound).empty());  // it read on: the wait starts over
  clock.Advance(bound);
  EXPECT_TRUE(registry.Unread(bound).empty());
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(registry.Unread(bound), std::vector<std::string>{id});

  // A new session starts with a clean slate; a lost worker is not named.
  auto second = Attach(registry, id, /*buffered=*/0);
  ASSERT_TRUE(registry.Send(id, message));
  EXPECT_TRUE(registry.Unread(bound).empty());
  clock.Advance(bound + absl::Seconds(1));
  EXPECT_EQ(registry.Unread(bound), std::vector<std::string>{id});
  ASSERT_TRUE(registry.MarkLost(id, "read nothing").ok());
  clock.Advance(bound + absl::Seconds(1));
  EXPECT_TRUE(registry.Unread(bound).empty());
}

// A worker whose heartbeats count its reads is named once a message its connection took
// stays uncounted past the bound. A heartbeat still arriving on a replaced session counts
// that session's messages, not the new one's.
TEST(WorkerRegistry, NamesAWorkerWhoseHeartbeatsLeaveAMessageUncounted) {
  SimulatedClock clock;
  WorkerRegistry registry({.clock = &clock});
  const std::string id = Register(registry, "w0");
  auto old_session = Attach(registry, id);
  auto session = Attach(registry, id);
  const absl::Duration bound = absl::Seconds(10);
  v1::CoordinatorMessage message;
  message.mutable_abort()->set_job_id("j");
  ASSERT_TRUE(registry.Heartbeat(id, 0, session.get()).ok());
  ASSERT_TRUE(registry.Send(id, message));
  ASSERT_TRUE(session->Pop().has_value());  // the connection took it
  EXPECT_TRUE(registry.Unread(bound).empty());
  ASSERT_TRUE(registry.Heartbeat(id, 5, old_session.get()).ok());  // the old stream's count
  clock.Advance(bound);
  EXPECT_TRUE(registry.Unread(bound).empty());
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(registry.Unread(bound), std::vector<std::string>{id});
  ASSERT_TRUE(registry.Heartbeat(id, 1, session.get()).ok());  // it read it after all
  EXPECT_TRUE(registry.Unread(bound).empty());
}

// What `get workers` shows: the session's messages sent as of the last check, those its
// heartbeats counted, both anew with a new session.
TEST(WorkerRegistry, ShowsTheMessagesASessionSentAndThoseItsHeartbeatsCounted) {
  SimulatedClock clock;
  WorkerRegistry registry({.clock = &clock});
  const std::string id = Register(registry, "w0");
  auto session = Attach(registry, id);
  EXPECT_FALSE(registry.Get(id)->has_session_messages_read());
  v1::CoordinatorMessage message;
  message.mutable_abort()->set_job_id("j");
  ASSERT_TRUE(registry.Send(id, message));
  ASSERT_TRUE(registry.Send(id, message));
  ASSERT_TRUE(session->Pop().has_value());
  ASSERT_TRUE(session->Pop().has_value());
  EXPECT_EQ(registry.Get(id)->session_messages_sent(), 0);  // not checked yet
  EXPECT_TRUE(registry.Unread(absl::Seconds(10)).empty());
  EXPECT_EQ(registry.Get(id)->session_messages_sent(), 2);
  ASSERT_TRUE(registry.Heartbeat(id, 1, session.get()).ok());
  EXPECT_EQ(registry.Get(id)->session_messages_read(), 1);
  Attach(registry, id);
  EXPECT_EQ(registry.Get(id)->session_messages_sent(), 0);
  EXPECT_FALSE(registry.Get(id)->has_session_messages_read());
}

TEST(WorkerRegistry, ReRegistrationReportsThePreviousState) {
  WorkerRegistry registry;
  const std::string id = Register(registry, "w0");
  Attach(registry, id);
  registry.SetBusy(id, "job-1", 1, 0);
  auto again = registry.Register(Request("w0"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->worker_id, id);
  EXPECT_EQ(again->previous.state(), v1::BUSY);
  EXPECT_EQ(again->previous.job_id(), "job-1");
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
  auto registered = registry.Register(request);
  ASSERT_TRUE(registered.ok());
  // Registered without a session yet, it is LOST: it offers no memory to weigh a job by.
  EXPECT_TRUE(registry.Offers(v1::CUDA).empty());
  Attach(registry, registered->worker_id);
  ASSERT_EQ(registry.Idle(v1::CUDA).size(), 1u);
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  const v1::WorkerInfo info = registry.Idle(v1::CUDA)[0];
  EXPECT_EQ(info.gpu().name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info.gpu().compute_capability_major(), 9);
  ASSERT_EQ(registry.Offers(v1::CUDA).size(), 1u);
  EXPECT_EQ(registry.Offers(v1::CUDA)[0].memory_bytes, int64_t{85} << 30);
  // Re-registered as a CPU worker: the GPU is gone.
  Register(registry, "gpu0");
  EXPECT_FALSE(registry.List()[0].has_gpu());
}

TEST(WorkerRegistry, KeepsTheFoldersAWorkerAdvertisesUntilItRegistersWithout) {
  WorkerRegistry registry;
  v1::RegisterWorkerRequest request = Request("w0");
  request.mutable_folders()->add_input_roots("/data");
  request.mutable_folders()->add_output_roots("/data/out");
  auto registered = registry.Register(request);
  ASSERT_TRUE(registered.ok());
  Attach(registry, registered->worker_id);
  const std::vector<IdleWorker> offers = registry.Offers(v1::CPU);
  ASSERT_EQ(offers.size(), 1u);
  ASSERT_TRUE(offers[0].folders.has_value());
  EXPECT_EQ(offers[0].folders->input_roots(0), "/data");
  EXPECT_EQ(registry.List()[0].folders().output_roots(0), "/data/out");
  // Restarted without its flags: it bounds nothing any more.
  Register(registry, "w0");
  EXPECT_FALSE(registry.List()[0].has_folders());
}

TEST(WorkerRegistry, IsBoundedAndForgetsWorkersLostLongAgo) {
  SimulatedClock clock;
  WorkerRegistry registry({.clock = &clock, .max_workers = 2, .lost_retention = absl::Hours(1)});
  const std::string w0 = Register(registry, "w0");
  Attach(registry, w0);
  Register(registry, "w1");
  auto third = registry.Register(Request("w2"));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("--max_workers"), std::string::npos) << third.status();
  // A name already registered may always come back.
  EXPECT_TRUE(registry.Register(Request("w1")).ok());

  // w1 never opened a session (it counts as lost); w0 is lost now.
  ASSERT_TRUE(registry.MarkLost(w0, "its session closed").ok());
  clock.Advance(absl::Minutes(59));
  EXPECT_TRUE(registry.RemoveLongLost().empty());
  clock.Advance(absl::Minutes(2));
  EXPECT_EQ(registry.RemoveLongLost(), (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_TRUE(registry.Register(Request("w2")).ok());
}

TEST(WorkerRegistry, AQuarantinedWorkerIsNotIdleUntilItEnds) {
  SimulatedClock clock;
  WorkerRegistry registry({.clock = &clock});
  const std::string id = Register(registry, "w0");
  Attach(registry, id);
  registry.Quarantine(id, "rank 1 never reached the rendezvous", clock.Now() + absl::Minutes(10));
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  EXPECT_EQ(registry.List()[0].quarantine_reason(), "rank 1 never reached the rendezvous");
  // Registering again (a restarted daemon) does not lift it.
  ASSERT_TRUE(registry.Register(Request("w0")).ok());
  Attach(registry, id);
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  clock.Advance(absl::Minutes(10));
  EXPECT_EQ(registry.Idle(v1::CPU).size(), 1u);
}

// A worker forgotten while quarantined (lost longer than --lost_worker_retention_ms, its
// quarantine longer still) is quarantined again when it registers before the end.
TEST(WorkerRegistry, AQuarantineOutlivesTheForgottenWorker) {
  SimulatedClock clock;
  WorkerRegistry registry({.clock = &clock, .lost_retention = absl::Hours(1)});
  const std::string id = Register(registry, "w0");
  Attach(registry, id);
  registry.Quarantine(id, "lost before its rank joined", clock.Now() + absl::Hours(2));
  ASSERT_TRUE(registry.MarkLost(id, "its session closed").ok());
  clock.Advance(absl::Minutes(61));
  ASSERT_EQ(registry.RemoveLongLost(), std::vector<std::string>{id});
  clock.Advance(absl::Minutes(29));
  Attach(registry, Register(registry, "w0"));
  EXPECT_TRUE(registry.Idle(v1::CPU).empty());
  EXPECT_EQ(registry.List()[0].quarantine_reason(), "lost before its rank joined");
  clock.Advance(absl::Minutes(31));
  EXPECT_EQ(registry.Idle(v1::CPU).size(), 1u);
}

TEST(WorkerRegistry, ClosingEverySessionCanSayGoodbyeFirst) {
  WorkerRegistry registry;
  auto outbox = Attach(registry, Register(registry, "w0"));
  v1::CoordinatorMessage going_away;
  going_away.mutable_going_away()->set_reason("stopping");
  registry.CloseAllSessions(going_away);
  EXPECT_TRUE(outbox->closed());
  auto last = outbox->Pop();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->going_away().reason(), "stopping");
}

TEST(WorkerRegistry, ListsInPagesSortedByIdWithAFilter) {
  WorkerRegistry registry;
  for (const char* name : {"c", "a", "e", "b", "d"}) Attach(registry, Register(registry, name));
  registry.SetBusy("b", "job-1", 1, 0);
  bool more = false;
  auto all = [](const v1::WorkerInfo&) { return true; };
  std::vector<v1::WorkerInfo> page = registry.List("", 2, all, &more);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].id(), "a");
  EXPECT_EQ(page[1].id(), "b");
  EXPECT_TRUE(more);
  page = registry.List("b", 10, all, &more);
  ASSERT_EQ(page.size(), 3u);
  EXPECT_EQ(page[0].id(), "c");
  EXPECT_FALSE(more);
  page = registry.List(
      "", 10, [](const v1::WorkerInfo& w) { return w.state() == v1::BUSY; }, &more);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].id(), "b");
}

}  // namespace
}  // namespace shardwise
