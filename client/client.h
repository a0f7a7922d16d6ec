#ifndef SHARDWISE_CLIENT_CLIENT_H_
#define SHARDWISE_CLIENT_CLIENT_H_

// The C++ client library: every JobService operation, with errors as absl::Status. The
// `shardwise` CLI is built on it.
//
// Thread-safety: a Client may be shared between threads.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/retry_policy.h"
#include "common/channel_credentials.h"
#include "proto/job_service.grpc.pb.h"

namespace shardwise {

struct ClientOptions {
  ChannelSecurity security;  // TLS: the CA the coordinator's certificate chains to
  std::string token;         // sent as "authorization: Bearer TOKEN" when not empty
  // How long a call asks a busy coordinator again (retry_policy.h's CallRetry).
  absl::Duration call_budget = CallRetry::kDefaultBudget;
  // How long Watch follows a job through lost contact (retry_policy.h's WatchRetry).
  absl::Duration watch_budget = WatchRetry::kDefaultBudget;
};

class Client {
 public:
  // Does not connect yet; the first call does. `address` is host:port. A bad security
  // option (an unreadable CA file) makes every call fail with INVALID_ARGUMENT, a token
  // without TLS to an address off this machine with FAILED_PRECONDITION (it is never sent
  // in plaintext but to loopback).
  explicit Client(const std::string& address, const ClientOptions& options = {});

  const std::string& address() const { return address_; }

  // Checks the spec locally (structure only: the coordinator applies its own limits and
  // checks files), then submits it under `request_id` (a new one where empty), so that a
  // retry (the call is retried when the coordinator is unreachable or busy) never makes a
  // second job; a caller that submits again after a failure passes the same id.
  // Returns the job id. Every call waits its turn, up to two minutes, while the
  // coordinator answers RESOURCE_EXHAUSTED or (all but SetCommHook) answers late or
  // UNAVAILABLE itself (retry_policy.h); a coordinator that is not reachable is
  // UNAVAILABLE, one reachable but late past that DEADLINE_EXCEEDED, and one that stays
  // unavailable its own UNAVAILABLE (its message: its state file refuses writes).
  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec, const std::string& request_id = "");
  absl::StatusOr<v1::Job> Get(const std::string& job_id);
  // Job summaries, oldest first, following the coordinator's pages until `limit` (0: all)
  // are read. Empty `states` and `submitter` match any.
  struct JobFilter {
    std::vector<v1::JobState> states;
    std::string submitter;
    size_t limit = 0;
  };
  absl::StatusOr<std::vector<v1::JobSummary>> ListJobs(const JobFilter& filter);
  absl::StatusOr<std::vector<v1::JobSummary>> ListJobs() { return ListJobs(JobFilter()); }
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  // Proposes a change of a running job's communication hook (JobService.SetCommHook).
  absl::StatusOr<v1::HookSwitch> SetCommHook(const std::string& job_id, const v1::CommHook& hook);
  // Sets how many replica groups a running fault-tolerant job trains with
  // (JobService.ScaleJob); returns the job.
  absl::StatusOr<v1::Job> Scale(const std::string& job_id, int32_t replicas);
  absl::StatusOr<v1::Timeline> GetTimeline(const std::string& job_id);
  // Workers sorted by id, following pages until `limit` (0: all) are read.
  struct WorkerFilter {
    std::vector<v1::WorkerState> states;
    v1::DeviceKind device = v1::DEVICE_KIND_UNSPECIFIED;  // unspecified: any
    size_t limit = 0;
  };
  absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers(const WorkerFilter& filter);
  absl::StatusOr<std::vector<v1::WorkerInfo>> ListWorkers() { return ListWorkers(WorkerFilter()); }

  // Calls `on_update` with the job now and after every change, until it ends; returns
  // the final job. A lost connection (a coordinator restarting) is followed by a new
  // watch, for up to options.watch_budget of lost contact, each loss told to `on_lost`
  // if given; past that, UNAVAILABLE.
  absl::StatusOr<v1::Job> Watch(const std::string& job_id,
                                const std::function<void(const v1::Job&)>& on_update,
                                const std::function<void(const absl::Status&)>& on_lost = {});
  // Follows the job as Watch does until `done` holds for a version of it, or it ends;
  // returns that version. DEADLINE_EXCEEDED once `deadline` passes first.
  absl::StatusOr<v1::Job> WatchUntil(const std::string& job_id,
                                     const std::function<bool(const v1::Job&)>& done,
                                     absl::Time deadline);

 private:
  // Whether the channel is connected (READY) now.
  bool Connected() const;
  absl::Status Convert(const grpc::Status& status) const;
  // One unary JobService call with the client's deadline, its retries (retry_policy.h)
  // and error conversion.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (v1::JobService::Stub::*method)(grpc::ClientContext*,
                                                                             const Request&,
                                                                             Response*),
                                const Request& request, Repeatable repeatable = Repeatable::kYes);
  // Watch and WatchUntil: WatchJob streams, a new one after each loss, until the job
  // ends or `on_update` says it has seen enough (returns true).
  absl::StatusOr<v1::Job> FollowJob(const std::string& job_id,
                                    const std::function<bool(const v1::Job&)>& on_update,
                                    const std::function<void(const absl::Status&)>& on_lost,
                                    absl::Time deadline);
  // One WatchJob stream, to its end or until `on_update` returns true (then OK).
  grpc::Status WatchOnce(const std::string& job_id,
                         const std::function<bool(const v1::Job&)>& on_update, absl::Time deadline);

  // Follows a listing's pages until `limit` (0: none) items are read.
  template <typename Request, typename Response, typename Item>
  absl::StatusOr<std::vector<Item>> ReadPages(
      grpc::Status (v1::JobService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
      Request request, const google::protobuf::RepeatedPtrField<Item>& (Response::*items)() const,
      size_t limit);

  void Prepare(grpc::ClientContext* context) const;

  const std::string address_;
  const std::string token_;
  const absl::Duration call_budget_;
  const absl::Duration watch_budget_;
  absl::Status channel_status_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

}  // namespace shardwise

#endif  // SHARDWISE_CLIENT_CLIENT_H_
