// The coordinator's handling of every message a client or worker can send it: the unary
// RPCs of JobService and RendezvousService through their gRPC service classes, and the
// worker registration and session messages through the JobController (the session
// stream only forwards them), over a real SQLite file, with two registered workers whose
// sessions are open and a job scheduled on them. The input is a sequence of messages,
//   [1 byte: bits 0-3 the kind (Kind below), bit 4 the worker (w0, w1)]
//   [2 bytes little-endian: the length] [the serialized protobuf request]
// Messages that do not parse are skipped. Nothing may crash; the coordinator must answer
// afterwards. Left out: the calls that block by design (RendezvousService.Wait and the
// JobService.WatchJob stream wait for changes).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "proto/worker_service.pb.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/job_service.h"
#include "server/rendezvous_service.h"
#include "server/rendezvous_store.h"
#include "server/state_store.h"
#include "server/worker_registry.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace shardwise;

enum Kind : uint8_t {
  kHeartbeat,
  kReport,
  kHookAck,
  kRegisterWorker,
  kSubmitJob,
  kGetJob,
  kListJobs,
  kSetCommHook,
  kGetTimeline,
  kCancelJob,
  kListWorkers,
  kRendezvousSet,
  kRendezvousGet,
  kRendezvousAdd,
  kCheckHeartbeats,
  kSchedule,  // the coordinator's own periodic calls, between messages
};

v1::JobSpec TwoRankJob() {
  v1::JobSpec spec;
  for (int w : {4, 8, 3}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.set_global_batch_size(8);
  spec.set_steps(5);
  spec.set_world_size(2);
  return spec;
}

// Parses `payload` as a Request and, if it parses, hands it to `call`.
template <typename Request, typename Call>
void IfParses(const uint8_t* payload, size_t size, Call call) {
  Request request;
  if (request.ParseFromArray(payload, static_cast<int>(size))) call(request);
}

// Everything a coordinator is made of, over a fresh state file.
struct Coordinator {
  std::unique_ptr<StateStore> store;
  std::unique_ptr<JobManager> jobs;
  WorkerRegistry workers;
  RendezvousStore rendezvous;
  std::unique_ptr<JobController> controller;
  std::unique_ptr<JobServiceImpl> job_service;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service;
};

std::unique_ptr<Coordinator> StartCoordinator() {
  const std::string state_file = fuzz::ScratchDir() + "/coordinator-state.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(state_file + suffix);
  auto c = std::make_unique<Coordinator>();
  auto store = StateStore::Open(state_file);
  if (!store.ok()) __builtin_trap();
  c->store = std::move(*store);
  auto jobs = JobManager::Create(c->store.get(), {});
  if (!jobs.ok()) __builtin_trap();
  c->jobs = std::move(*jobs);
  JobController::Options options;
  options.check_paths = false;
  c->controller =
      std::make_unique<JobController>(c->jobs.get(), &c->workers, &c->rendezvous, options);
  c->job_service = std::make_unique<JobServiceImpl>(c->controller.get(), c->jobs.get(), &c->workers,
                                                    /*watch_hub=*/nullptr);
  c->rendezvous_service = std::make_unique<RendezvousServiceImpl>(&c->rendezvous);
  return c;
}

// `token`: the worker's rendezvous token from its assignment, put into rendezvous calls
// that carry none, so that the fuzzer reaches the store behind the token check too.
void Deliver(Coordinator& c, uint8_t kind, const std::string& worker, const std::string& token,
             const uint8_t* payload, size_t size) {
  auto with_token = [&](auto& request) {
    if (request.scope().token().empty()) request.mutable_scope()->set_token(token);
  };
  JobController& controller = *c.controller;
  JobServiceImpl& jobs = *c.job_service;
  RendezvousServiceImpl& rendezvous = *c.rendezvous_service;
  grpc::ServerContext context;
  switch (kind) {
    case kHeartbeat:
      IfParses<v1::Heartbeat>(payload, size, [&](auto& m) { controller.OnHeartbeat(worker, m); });
      break;
    case kReport:
      IfParses<v1::AttemptReport>(payload, size, [&](auto& m) { controller.OnReport(worker, m); });
      break;
    case kHookAck:
      IfParses<v1::HookChangeAck>(payload, size, [&](auto& m) { controller.OnHookAck(worker, m); });
      break;
    case kRegisterWorker:
      IfParses<v1::RegisterWorkerRequest>(payload, size,
                                          [&](auto& m) { (void)controller.RegisterWorker(m); });
      break;
    case kSubmitJob:
      IfParses<v1::SubmitJobRequest>(payload, size, [&](auto& m) {
        v1::SubmitJobResponse response;
        (void)jobs.SubmitJob(&context, &m, &response);
      });
      break;
    case kGetJob:
      IfParses<v1::GetJobRequest>(payload, size, [&](auto& m) {
        v1::Job response;
        (void)jobs.GetJob(&context, &m, &response);
      });
      break;
    case kListJobs:
      IfParses<v1::ListJobsRequest>(payload, size, [&](auto& m) {
        v1::ListJobsResponse response;
        (void)jobs.ListJobs(&context, &m, &response);
      });
      break;
    case kSetCommHook:
      IfParses<v1::SetCommHookRequest>(payload, size, [&](auto& m) {
        v1::HookSwitch response;
        (void)jobs.SetCommHook(&context, &m, &response);
      });
      break;
    case kGetTimeline:
      IfParses<v1::GetTimelineRequest>(payload, size, [&](auto& m) {
        v1::Timeline response;
        (void)jobs.GetTimeline(&context, &m, &response);
      });
      break;
    case kCancelJob:
      IfParses<v1::CancelJobRequest>(payload, size, [&](auto& m) {
        v1::Job response;
        (void)jobs.CancelJob(&context, &m, &response);
      });
      break;
    case kListWorkers:
      IfParses<v1::ListWorkersRequest>(payload, size, [&](auto& m) {
        v1::ListWorkersResponse response;
        (void)jobs.ListWorkers(&context, &m, &response);
      });
      break;
    case kRendezvousSet:
      IfParses<v1::RendezvousSetRequest>(payload, size, [&](auto& m) {
        v1::RendezvousSetResponse response;
        with_token(m);
        (void)rendezvous.Set(&context, &m, &response);
      });
      break;
    case kRendezvousGet:
      IfParses<v1::RendezvousGetRequest>(payload, size, [&](auto& m) {
        v1::RendezvousGetResponse response;
        with_token(m);
        (void)rendezvous.Get(&context, &m, &response);
      });
      break;
    case kRendezvousAdd:
      IfParses<v1::RendezvousAddRequest>(payload, size, [&](auto& m) {
        v1::RendezvousAddResponse response;
        with_token(m);
        (void)rendezvous.Add(&context, &m, &response);
      });
      break;
    case kCheckHeartbeats:
      controller.CheckHeartbeats();
      break;
    default:
      controller.Schedule();
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<Coordinator> c = StartCoordinator();
  std::string ids[2];
  std::shared_ptr<QueuedOutbox> sessions[2];
  for (int w = 0; w < 2; ++w) {
    v1::RegisterWorkerRequest request;
    request.set_name(w == 0 ? "w0" : "w1");
    request.set_device(v1::CPU);
    auto registered = c->controller->RegisterWorker(request);
    if (!registered.ok()) __builtin_trap();
    ids[w] = registered->worker_id();
    sessions[w] = std::make_shared<QueuedOutbox>();
    if (!c->controller->OpenSession(ids[w], sessions[w]).ok()) __builtin_trap();
  }
  if (!c->controller->Submit(TwoRankJob()).ok()) __builtin_trap();
  std::string tokens[2];
  for (int w = 0; w < 2; ++w) {
    while (auto message = sessions[w]->Pop()) {
      if (message->has_assignment()) tokens[w] = message->assignment().rendezvous_token();
    }
  }

  for (size_t at = 0; at + 3 <= size;) {
    const uint8_t tag = data[at];
    const size_t length = data[at + 1] | size_t{data[at + 2]} << 8;
    at += 3;
    const size_t take = std::min(length, size - at);
    const int w = (tag >> 4) & 1;
    Deliver(*c, tag & 15, ids[w], tokens[w], data + at, take);
    at += take;
  }
  c->controller->CheckHeartbeats();
  // Still answering, and consistent about the job it scheduled first.
  if (!c->jobs->Get("job-1").ok()) __builtin_trap();
  for (int w = 0; w < 2; ++w) c->controller->CloseSession(ids[w], sessions[w]);
  return 0;
}
