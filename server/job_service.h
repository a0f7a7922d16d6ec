#ifndef SHARDWISE_SERVER_JOB_SERVICE_H_
#define SHARDWISE_SERVER_JOB_SERVICE_H_

// gRPC plumbing of the client-facing JobService; the logic is in JobController and
// JobManager. The unary calls run on gRPC's bounded pool of synchronous threads;
// WatchJob streams are served by the WatchHub, without a thread each.

#include "proto/job_service.grpc.pb.h"
#include "server/client_auth.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/watch_hub.h"
#include "server/worker_registry.h"

namespace shardwise {

class JobServiceImpl final
    : public v1::JobService::WithCallbackMethod_WatchJob<v1::JobService::Service> {
 public:
  // `watch_hub` may be null (tests and the fuzzer, which do not watch). `tokens` may be
  // null: then every caller is an anonymous admin (a coordinator that authenticates no
  // one, which it allows only on loopback or with --insecure).
  JobServiceImpl(JobController* controller, const JobManager* jobs, const WorkerRegistry* workers,
                 WatchHub* watch_hub, TokenAuthenticator* tokens = nullptr)
      : controller_(controller),
        jobs_(jobs),
        workers_(workers),
        watch_hub_(watch_hub),
        tokens_(tokens) {}

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
  grpc::ServerWriteReactor<v1::Job>* WatchJob(grpc::CallbackServerContext* context,
                                              const v1::WatchJobRequest* request) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;

  // Pages hold at most this many entries; a request for more is INVALID_ARGUMENT.
  static constexpr int kDefaultPageSize = 500;
  static constexpr int kMaxPageSize = 1000;

 private:
  // The caller, if it may do `action` (`what`, in words, for the refusal).
  absl::StatusOr<Principal> Caller(const grpc::ServerContextBase& context, Action action,
                                   const char* what) const;
  // The same for a change of job `job_id`, which submitters may make to their own jobs.
  absl::Status CallerMayChange(const grpc::ServerContextBase& context, const std::string& job_id,
                               const char* what) const;

  JobController* const controller_;
  const JobManager* const jobs_;
  const WorkerRegistry* const workers_;
  WatchHub* const watch_hub_;
  TokenAuthenticator* const tokens_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_SERVICE_H_
