#ifndef SHARDWISE_SERVER_JOB_SERVICE_H_
#define SHARDWISE_SERVER_JOB_SERVICE_H_

// gRPC plumbing of the client-facing JobService; the logic is in JobController and
// JobManager.

#include "proto/job_service.grpc.pb.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/worker_registry.h"

namespace shardwise {

class JobServiceImpl final : public v1::JobService::Service {
 public:
  JobServiceImpl(JobController* controller, const JobManager* jobs, const WorkerRegistry* workers)
      : controller_(controller), jobs_(jobs), workers_(workers) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status SetCommHook(grpc::ServerContext* context, const v1::SetCommHookRequest* request,
                           v1::HookSwitch* response) override;
  grpc::Status GetTimeline(grpc::ServerContext* context, const v1::GetTimelineRequest* request,
                           v1::Timeline* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::Job>* writer) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;

 private:
  JobController* const controller_;
  const JobManager* const jobs_;
  const WorkerRegistry* const workers_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_SERVICE_H_
