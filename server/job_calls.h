#ifndef SHARDWISE_SERVER_JOB_CALLS_H_
#define SHARDWISE_SERVER_JOB_CALLS_H_

// What each call of the client-facing JobService does: the caller's authentication and
// role, the request's checks, and the work, done by JobController and JobManager. No
// gRPC plumbing: JobServiceImpl answers the calls with these, and the fuzzer calls them
// directly.

#include <functional>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "proto/job_service.pb.h"
#include "server/client_auth.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/worker_registry.h"

namespace shardwise {

class JobCalls {
 public:
  // `tokens` may be null: then every caller is an anonymous admin (a coordinator that
  // authenticates no one, which it allows only on loopback or with --insecure).
  JobCalls(JobController* controller, const JobManager* jobs, const WorkerRegistry* workers,
           TokenAuthenticator* tokens = nullptr)
      : controller_(controller), jobs_(jobs), workers_(workers), tokens_(tokens) {}

  grpc::Status SubmitJob(const grpc::ServerContextBase& context,
                         const v1::SubmitJobRequest& request, v1::SubmitJobResponse* response);
  grpc::Status GetJob(const grpc::ServerContextBase& context, const v1::GetJobRequest& request,
                      v1::Job* response);
  grpc::Status ListJobs(const grpc::ServerContextBase& context, const v1::ListJobsRequest& request,
                        v1::ListJobsResponse* response);
  grpc::Status SetCommHook(const grpc::ServerContextBase& context,
                           const v1::SetCommHookRequest& request, v1::HookSwitch* response);
  grpc::Status GetTimeline(const grpc::ServerContextBase& context,
                           const v1::GetTimelineRequest& request, v1::Timeline* response);
  grpc::Status ScaleJob(const grpc::ServerContextBase& context, const v1::ScaleJobRequest& request,
                        v1::Job* response);
  grpc::Status CancelJob(const grpc::ServerContextBase& context,
                         const v1::CancelJobRequest& request, v1::Job* response);
  grpc::Status ListWorkers(const grpc::ServerContextBase& context,
                           const v1::ListWorkersRequest& request,
                           v1::ListWorkersResponse* response);
  // Who may watch the job the request names (the WatchHub streams it): the caller's
  // principal's name (empty where no token is checked), or why not.
  absl::StatusOr<std::string> Watcher(const grpc::ServerContextBase& context,
                                      const v1::WatchJobRequest& request) const;
  // Whether the caller's token still allows the watch it opened, asked again while the
  // watch lasts (a token revoked meanwhile ends it); null where no token is checked.
  std::function<absl::Status()> WatchStillAllowed(const grpc::ServerContextBase& context) const;

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
  TokenAuthenticator* const tokens_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_CALLS_H_
