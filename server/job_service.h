#ifndef SHARDWISE_SERVER_JOB_SERVICE_H_
#define SHARDWISE_SERVER_JOB_SERVICE_H_

// gRPC plumbing of the client-facing JobService, on gRPC's callback API: each unary call
// is queued on the CallPool, whose threads answer it with JobCalls, and the callback
// returns at once, so gRPC's threads (which also carry the workers' heartbeats) never
// wait on a client's call. A flood of clients waits its turn in the pool's queue; beyond
// its bound a call is answered RESOURCE_EXHAUSTED, which clients retry with backoff.
// Submissions have a pool of their own: admitting a job reads the files it names (a
// checkpoint's headers, a tokenizer folder), bounded but not instant, and a burst of them
// must not hold up the reads of every other client.
// WatchJob streams are served by the WatchHub.

#include <functional>

#include "proto/job_service.grpc.pb.h"
#include "server/call_pool.h"
#include "server/job_calls.h"
#include "server/watch_hub.h"

namespace shardwise {

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // `watch_hub` may be null (tests, which do not watch). `submissions` answers SubmitJob
  // (null: `pool` does), `pool` the other unary calls.
  JobServiceImpl(JobCalls* calls, CallPool* pool, CallPool* submissions, WatchHub* watch_hub)
      : calls_(calls),
        pool_(pool),
        submissions_(submissions != nullptr ? submissions : pool),
        watch_hub_(watch_hub) {}

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
  grpc::ServerUnaryReactor* ScaleJob(grpc::CallbackServerContext* context,
                                     const v1::ScaleJobRequest* request,
                                     v1::Job* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerWriteReactor<v1::Job>* WatchJob(grpc::CallbackServerContext* context,
                                              const v1::WatchJobRequest* request) override;

 private:
  // Queues `call` on the pool, which finishes the call with its status; refused there,
  // the call is answered RESOURCE_EXHAUSTED at once.
  grpc::ServerUnaryReactor* Queued(grpc::CallbackServerContext* context,
                                   std::function<grpc::Status()> call);
  grpc::ServerUnaryReactor* QueuedOn(CallPool* pool, grpc::CallbackServerContext* context,
                                     std::function<grpc::Status()> call);

  JobCalls* const calls_;
  CallPool* const pool_;
  CallPool* const submissions_;
  WatchHub* const watch_hub_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_SERVICE_H_
