#include "server/job_service.h"

namespace shardwise {
namespace {

// Answers a unary call with `status` (the response is filled already).
grpc::ServerUnaryReactor* Answered(grpc::CallbackServerContext* context,
                                   const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// A watch refused before it starts.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::Job> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::SubmitJobResponse* response) {
  return Answered(context, calls_->SubmitJob(*context, *request, response));
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  return Answered(context, calls_->GetJob(*context, *request, response));
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  return Answered(context, calls_->ListJobs(*context, *request, response));
}

grpc::ServerUnaryReactor* JobServiceImpl::SetCommHook(grpc::CallbackServerContext* context,
                                                      const v1::SetCommHookRequest* request,
                                                      v1::HookSwitch* response) {
  return Answered(context, calls_->SetCommHook(*context, *request, response));
}

grpc::ServerUnaryReactor* JobServiceImpl::GetTimeline(grpc::CallbackServerContext* context,
                                                      const v1::GetTimelineRequest* request,
                                                      v1::Timeline* response) {
  return Answered(context, calls_->GetTimeline(*context, *request, response));
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::Job* response) {
  return Answered(context, calls_->CancelJob(*context, *request, response));
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const v1::ListWorkersRequest* request,
                                                      v1::ListWorkersResponse* response) {
  return Answered(context, calls_->ListWorkers(*context, *request, response));
}

grpc::ServerWriteReactor<v1::Job>* JobServiceImpl::WatchJob(grpc::CallbackServerContext* context,
                                                            const v1::WatchJobRequest* request) {
  const grpc::Status allowed = calls_->WatchAllowed(*context, *request);
  if (!allowed.ok()) return new RefusedWatch(allowed);
  if (watch_hub_ == nullptr) {
    return new RefusedWatch(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "watching is not served here"));
  }
  return watch_hub_->Watch(request->job_id());
}

}  // namespace shardwise
