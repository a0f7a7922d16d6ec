#include "server/job_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace shardwise {
namespace {

grpc::Status CheckJobId(const std::string& job_id) {
  if (job_id.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id: must not be empty");
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  auto job = controller_->Submit(request->spec());
  if (!job.ok()) return ToGrpcStatus(job.status());
  response->set_job_id(job->id());
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                                    v1::Job* response) {
  if (auto status = CheckJobId(request->job_id()); !status.ok()) return status;
  auto job = jobs_->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                                      v1::ListJobsResponse* response) {
  for (v1::Job& job : jobs_->List()) {
    job.clear_events();  // `describe` shows them; a listing stays small
    *response->add_jobs() = std::move(job);
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                                       v1::Job* response) {
  if (auto status = CheckJobId(request->job_id()); !status.ok()) return status;
  auto job = controller_->Cancel(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = std::move(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::SetCommHook(grpc::ServerContext*,
                                         const v1::SetCommHookRequest* request,
                                         v1::HookSwitch* response) {
  if (auto status = CheckJobId(request->job_id()); !status.ok()) return status;
  auto proposal = controller_->SetCommHook(request->job_id(), request->hook());
  if (!proposal.ok()) return ToGrpcStatus(proposal.status());
  *response = std::move(*proposal);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetTimeline(grpc::ServerContext*,
                                         const v1::GetTimelineRequest* request,
                                         v1::Timeline* response) {
  if (auto status = CheckJobId(request->job_id()); !status.ok()) return status;
  auto timeline = controller_->GetTimeline(request->job_id());
  if (!timeline.ok()) return ToGrpcStatus(timeline.status());
  *response = std::move(*timeline);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::Job>* writer) {
  if (auto status = CheckJobId(request->job_id()); !status.ok()) return status;
  uint64_t seen_version = 0;
  // Wakes regularly to notice a client that went away or a server shutting down.
  while (!context->IsCancelled()) {
    auto job = jobs_->WaitForChange(request->job_id(), &seen_version, absl::Milliseconds(500));
    if (absl::IsDeadlineExceeded(job.status())) continue;
    if (!job.ok()) return ToGrpcStatus(job.status());
    if (!writer->Write(*job)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    if (IsTerminal(job->state())) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
}

grpc::Status JobServiceImpl::ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                                         v1::ListWorkersResponse* response) {
  for (v1::WorkerInfo& worker : workers_->List()) *response->add_workers() = std::move(worker);
  return grpc::Status::OK;
}

}  // namespace shardwise
