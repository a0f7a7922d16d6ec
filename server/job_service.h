#ifndef SHARDWISE_SERVER_JOB_SERVICE_H_
#define SHARDWISE_SERVER_JOB_SERVICE_H_

// gRPC plumbing of the client-facing JobService, on gRPC's callback API: no call holds a
// thread of its own while it waits to run or to be answered, so a flood of clients queues
// in gRPC (each call waits its turn) instead of being refused for want of a thread, as
// a synchronous service's bounded pool refuses them (RESOURCE_EXHAUSTED). Each unary call
// is answered by JobCalls as it arrives; WatchJob streams are served by the WatchHub.

#include "proto/job_service.grpc.pb.h"
#include "server/job_calls.h"
#include "server/watch_hub.h"

namespace shardwise {

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // `watch_hub` may be null (tests, which do not watch).
  JobServiceImpl(JobCalls* calls, WatchHub* watch_hub) : calls_(calls), watch_hub_(watch_hub) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* SetCommHook(grpc::CallbackServerContext* context,
                                        const v1::SetCommHookRequest* request,
                                        v1::HookSwitch* response) override;
  grpc::ServerUnaryReactor* GetTimeline(grpc::CallbackServerContext* context,
                                        const v1::GetTimelineRequest* request,
                                        v1::Timeline* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerWriteReactor<v1::Job>* WatchJob(grpc::CallbackServerContext* context,
                                              const v1::WatchJobRequest* request) override;

 private:
  JobCalls* const calls_;
  WatchHub* const watch_hub_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_SERVICE_H_
