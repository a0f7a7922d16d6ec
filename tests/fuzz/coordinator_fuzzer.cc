// The coordinator's handling of every message a client or worker can send it: the unary
// RPCs of JobService and RendezvousService through their gRPC service classes, and the
// worker registration and session messages through the JobController (the session
// stream only forwards them), over a real SQLite file, with two registered workers whose
// sessions are open and a job scheduled on them. The input is a sequence of messages,
//   [1 byte: bits 0-3 and 5-7 the kind (Kind below; bits 5-7 its high bits, which the
//    first 16 kinds leave 0), bit 4 the worker (w0, w1)]
//   [2 bytes little-endian: the length] [the serialized protobuf request]
// Messages that do not parse are skipped. Nothing may crash; the coordinator must answer
// afterwards. Left out: the calls that block by design (RendezvousService.Wait and the
// JobService.WatchJob stream wait for changes).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "proto/worker_service.pb.h"
#include "server/job_calls.h"
#include "server/job_controller.h"
#include "server/rendezvous_service.h"
#include "server/testing/coordinator_core.h"
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
  kScaleJob,  // after the others: the corpus's tags keep their meaning
  kRendezvousGetMany,
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
  testing::CoordinatorCore core;
  std::unique_ptr<JobCalls> job_calls;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service;
};

std::unique_ptr<Coordinator> StartCoordinator() {
  const std::string state_file = fuzz::ScratchDir() + "/coordinator-state.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(state_file + suffix);
  auto c = std::make_unique<Coordinator>();
  auto core = testing::OpenCoordinatorCore(state_file, {});
  if (!core.ok()) __builtin_trap();
  c->core = std::move(*core);
  c->job_calls = std::make_unique<JobCalls>(c->core.controller.get(), c->core.jobs.get(),
                                            c->core.workers.get());
  c->rendezvous_service = std::make_unique<RendezvousServiceImpl>(c->core.rendezvous.get());
  return c;
}

// Parses the payload as the method's request and calls the service with it; the response
// is dropped. `prepare` may change the request first.
template <typename Service, typename Request, typename Response>
void CallIfParses(Service& service,
                  grpc::Status (Service::*method)(grpc::ServerContext*, const Request*, Response*),
                  const uint8_t* payload, size_t size,
                  const std::function<void(Request&)>& prepare = nullptr) {
  IfParses<Request>(payload, size, [&](Request& request) {
    if (prepare) prepare(request);
    grpc::ServerContext context;
    Response response;
    (void)(service.*method)(&context, &request, &response);
  });
}

// The same for a JobCalls call (which takes the request by reference).
template <typename Request, typename Response>
void CallIfParses(JobCalls& calls,
                  grpc::Status (JobCalls::*method)(const grpc::ServerContextBase&, const Request&,
                                                   Response*),
                  const uint8_t* payload, size_t size) {
  IfParses<Request>(payload, size, [&](Request& request) {
    grpc::ServerContext context;
    Response response;
    (void)(calls.*method)(context, request, &response);
  });
}

// A message from worker `worker` on its session; false for a kind that is not one.
bool DeliverWorkerMessage(JobController& controller, uint8_t kind, const std::string& worker,
                          const uint8_t* payload, size_t size) {
  switch (kind) {
    case kHeartbeat:
      IfParses<v1::Heartbeat>(payload, size, [&](auto& m) { controller.OnHeartbeat(worker, m); });
      return true;
    case kReport:
      IfParses<v1::AttemptReport>(payload, size, [&](auto& m) { controller.OnReport(worker, m); });
      return true;
    case kHookAck:
      IfParses<v1::HookChangeAck>(payload, size, [&](auto& m) { controller.OnHookAck(worker, m); });
      return true;
    case kRegisterWorker:
      IfParses<v1::RegisterWorkerRequest>(payload, size,
                                          [&](auto& m) { (void)controller.RegisterWorker(m); });
      return true;
    default:
      return false;
  }
}

// A client's call of the job service; false for a kind that is not one.
bool DeliverJobCall(JobCalls& jobs, uint8_t kind, const uint8_t* payload, size_t size) {
  using S = JobCalls;
  switch (kind) {
    case kSubmitJob:
      return CallIfParses(jobs, &S::SubmitJob, payload, size), true;
    case kGetJob:
      return CallIfParses(jobs, &S::GetJob, payload, size), true;
    case kListJobs:
      return CallIfParses(jobs, &S::ListJobs, payload, size), true;
    case kSetCommHook:
      return CallIfParses(jobs, &S::SetCommHook, payload, size), true;
    case kGetTimeline:
      return CallIfParses(jobs, &S::GetTimeline, payload, size), true;
    case kCancelJob:
      return CallIfParses(jobs, &S::CancelJob, payload, size), true;
    case kListWorkers:
      return CallIfParses(jobs, &S::ListWorkers, payload, size), true;
    case kScaleJob:
      return CallIfParses(jobs, &S::ScaleJob, payload, size), true;
    default:
      return false;
  }
}

// A rendezvous call. `token`: the worker's rendezvous token from its assignment, put into
// calls that carry none, so that the fuzzer reaches the store behind the token check too.
bool DeliverRendezvousCall(RendezvousServiceImpl& rendezvous, uint8_t kind,
                           const std::string& token, const uint8_t* payload, size_t size) {
  using S = RendezvousServiceImpl;
  auto with_token = [&token](auto& request) {
    if (request.scope().token().empty()) request.mutable_scope()->set_token(token);
  };
  switch (kind) {
    case kRendezvousSet:
      CallIfParses<S, v1::RendezvousSetRequest, v1::RendezvousSetResponse>(
          rendezvous, &S::Set, payload, size, with_token);
      return true;
    case kRendezvousGet:
      CallIfParses<S, v1::RendezvousGetRequest, v1::RendezvousGetResponse>(
          rendezvous, &S::Get, payload, size, with_token);
      return true;
    case kRendezvousAdd:
      CallIfParses<S, v1::RendezvousAddRequest, v1::RendezvousAddResponse>(
          rendezvous, &S::Add, payload, size, with_token);
      return true;
    case kRendezvousGetMany:
      CallIfParses<S, v1::RendezvousGetManyRequest, v1::RendezvousGetManyResponse>(
          rendezvous, &S::GetMany, payload, size, with_token);
      return true;
    default:
      return false;
  }
}

void Deliver(Coordinator& c, uint8_t kind, const std::string& worker, const std::string& token,
             const uint8_t* payload, size_t size) {
  if (DeliverWorkerMessage(*c.core.controller, kind, worker, payload, size) ||
      DeliverJobCall(*c.job_calls, kind, payload, size) ||
      DeliverRendezvousCall(*c.rendezvous_service, kind, token, payload, size)) {
    return;
  }
  if (kind == kCheckHeartbeats) {
    c.core.controller->CheckHeartbeats();
  } else {
    c.core.controller->Schedule();
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
    auto registered = c->core.controller->RegisterWorker(request);
    if (!registered.ok()) __builtin_trap();
    ids[w] = registered->worker_id();
    sessions[w] = std::make_shared<QueuedOutbox>();
    if (!c->core.controller->OpenSession(ids[w], sessions[w]).ok()) __builtin_trap();
  }
  if (!c->core.controller->Submit(TwoRankJob()).ok()) __builtin_trap();
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
    // Kinds past 15 (kScaleJob, ...) in bits 5-7: bits 0-3 alone never reached them.
    const uint8_t kind = static_cast<uint8_t>((tag & 15) | ((tag >> 5) << 4));
    Deliver(*c, kind, ids[w], tokens[w], data + at, take);
    at += take;
  }
  c->core.controller->CheckHeartbeats();
  // Still answering, and consistent about the job it scheduled first.
  if (!c->core.jobs->Get("job-1").ok()) __builtin_trap();
  for (int w = 0; w < 2; ++w) c->core.controller->CloseSession(ids[w], sessions[w]);
  return 0;
}
