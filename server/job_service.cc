#include "server/job_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace shardwise {
namespace {

// A watch refused before it starts.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::Job> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* JobServiceImpl::Queued(grpc::CallbackServerContext* context,
                                                 std::function<grpc::Status()> call) {
  return QueuedOn(pool_, context, std::move(call));
}

grpc::ServerUnaryReactor* JobServiceImpl::QueuedOn(CallPool* pool,
                                                   grpc::CallbackServerContext* context,
                                                   std::function<grpc::Status()> call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The request and response stay valid until the reactor is finished. A call whose
  // client gave up while it waited (its deadline passed, it was cancelled) is not run: its
  // client knows no outcome and may make it again (run late, a submission without a
  // request id would make two jobs), and under a flood it takes a thread from calls still
  // awaited.
  const auto run = [reactor, context, call = std::move(call)] {
    if (context->IsCancelled()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                                   "the client gave up before the coordinator took the call"));
      return;
    }
    reactor->Finish(call());
  };
  if (!pool->TryPost(run)) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("the coordinator has ", pool->max_queued(), " ",
                                  pool == submissions_ && submissions_ != pool_
                                      ? "submissions waiting (--max_queued_submissions)"
                                      : "client calls waiting (--max_queued_client_calls)",
                                  "; try again shortly")));
  }
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  return QueuedOn(submissions_, context,
                  [=] { return calls_->SubmitJob(*context, *request, response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  return Queued(context, [=] { return calls_->GetJob(*context, *request, response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  return Queued(context, [=] { return calls_->ListJobs(*context, *request, response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::SetCommHook(grpc::CallbackServerContext* context,
                                                      const v1::SetCommHookRequest* request,
                                                      v1::HookSwitch* response) {
  return Queued(context, [=] { return calls_->SetCommHook(*context, *request, response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::ScaleJob(grpc::CallbackServerContext* context,
                                                   const v1::ScaleJobRequest* request,
                                                   v1::Job* response) {
  return Queued(context, [=] { return calls_->ScaleJob(*context, *request, response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::GetTimeline(grpc::CallbackServerContext* context,
                                                      const v1::GetTimelineRequest* request,
                                                      v1::Timeline* response) {
  return Queued(context, [=] { return calls_->GetTimeline(*context, *request, response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::Job* response) {
  return Queued(context, [=] { return calls_->CancelJob(*context, *request, response); });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* request,
                                                      v1::ListWorkersResponse* response) {
  return Queued(context, [=] { return calls_->ListWorkers(*context, *request, response); });
}

grpc::ServerWriteReactor<v1::Job>* JobServiceImpl::WatchJob(grpc::CallbackServerContext* context,
                                                            const v1::WatchJobRequest* request) {
  const absl::StatusOr<std::string> watcher = calls_->Watcher(*context, *request);
  if (!watcher.ok()) return new RefusedWatch(ToGrpcStatus(watcher.status()));
  if (watch_hub_ == nullptr) {
    return new RefusedWatch(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "watching is not served here"));
  }
  // Refused for room, clients retry with backoff (client.cc): a watch waits, not fails.
  absl::StatusOr<grpc::ServerWriteReactor<v1::Job>*> watch =
      watch_hub_->Watch(request->job_id(), *watcher, calls_->WatchStillAllowed(*context), context);
  if (!watch.ok()) return new RefusedWatch(ToGrpcStatus(watch.status()));
  return *watch;
}

}  // namespace shardwise
