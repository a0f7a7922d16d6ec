#include "client/client.h"

#include <algorithm>
#include <chrono>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/retry_policy.h"
#include "common/grpc_status.h"
#include "common/random_token.h"
#include "contracts/job_spec_validation.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace shardwise {
namespace {

constexpr auto kCallTimeout = std::chrono::seconds(10);

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
}

// Every call but SetCommHook is retried (gRPC's retry policy: at most 5 attempts,
// exponential backoff with full jitter) when the connection drops, as it does once when
// a coordinator restarts, and when the coordinator is too busy to take it
// (RESOURCE_EXHAUSTED: its queue of client calls is full, --max_queued_client_calls).
// Each may run twice: all but SubmitJob read, set an end state (CancelJob) or an
// absolute target (ScaleJob), and SubmitJob carries a request id, with which a retried
// submission returns the job the first one made. A second SetCommHook would be refused
// while the first is agreed; only its RESOURCE_EXHAUSTED (never run) is asked again
// (retry_policy.h).
constexpr char kRetryServiceConfig[] = R"json({
  "methodConfig": [{
    "name": [
      {"service": "shardwise.v1.JobService", "method": "SubmitJob"},
      {"service": "shardwise.v1.JobService", "method": "GetJob"},
      {"service": "shardwise.v1.JobService", "method": "ListJobs"},
      {"service": "shardwise.v1.JobService", "method": "CancelJob"},
      {"service": "shardwise.v1.JobService", "method": "ScaleJob"},
      {"service": "shardwise.v1.JobService", "method": "GetTimeline"},
      {"service": "shardwise.v1.JobService", "method": "WatchJob"},
      {"service": "shardwise.v1.JobService", "method": "ListWorkers"}
    ],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
    }
  }]
})json";

std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kRetryServiceConfig);
  // A timeline (up to 2^18 spans of a job) is larger than gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  // A watch may wait hours between updates: pings every 20 s (the coordinator accepts
  // one every 5 s) find a connection that died without a word within half a minute,
  // and the watch is made again (retry_policy.h) instead of waiting forever.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // a quiet watch sends no data
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace

Client::Client(const std::string& address, const ClientOptions& options)
    : address_(address),
      token_(options.token),
      call_budget_(options.call_budget),
      watch_budget_(options.watch_budget) {
  auto credentials = MakeChannelCredentials(options.security);
  channel_status_ = credentials.status();
  if (channel_status_.ok()) {
    channel_status_ = CheckTokenTransport(options.security, address, options.token);
  }
  channel_ =
      MakeChannel(address, credentials.ok() ? *credentials : grpc::InsecureChannelCredentials());
  stub_ = v1::JobService::NewStub(channel_);
}

bool Client::Connected() const { return channel_->GetState(false) == GRPC_CHANNEL_READY; }

void Client::Prepare(grpc::ClientContext* context) const {
  SetDeadline(context);
  if (!token_.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
}

// A coordinator that cannot be reached is told apart from one that is reached but late
// (its queue of calls long), which a wrong address is not.
absl::Status Client::Convert(const grpc::Status& status) const {
  const bool late = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (late && Connected()) {
    return absl::DeadlineExceededError(
        absl::StrCat("the coordinator at ", address_, " is reachable but did not answer within ",
                     absl::FormatDuration(absl::FromChrono(kCallTimeout)),
                     " (it is busy: see its shardwise_coordinator_* metrics)"));
  }
  // UNAVAILABLE on a channel that is up is the coordinator's own answer (its state file
  // refuses writes), whose message says so: it was reached.
  const bool unavailable = status.error_code() == grpc::StatusCode::UNAVAILABLE;
  if (unavailable && Connected()) return FromGrpcStatus(status);
  if (unavailable || late) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the coordinator at ", address_,
                     " (is shardwise-coordinator running there? set --coordinator or "
                     "SHARDWISE_COORDINATOR): ",
                     status.error_message()));
  }
  return FromGrpcStatus(status);
}

template <typename Request, typename Response>
absl::StatusOr<Response> Client::Call(
    grpc::Status (v1::JobService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request, Repeatable repeatable) {
  if (!channel_status_.ok()) return channel_status_;
  CallRetry retry(absl::Now(), call_budget_);
  while (true) {
    Response response;
    grpc::ClientContext context;
    Prepare(&context);
    grpc::Status status = (stub_.get()->*method)(&context, request, &response);
    if (status.ok()) return response;
    const std::optional<absl::Duration> pause =
        retry.After(status, Connected(), repeatable, absl::Now());
    if (!pause.has_value()) return Convert(status);
    thread_local absl::BitGen random;
    absl::SleepFor(*pause * absl::Uniform(random, 0.0, 1.0));
  }
}

absl::StatusOr<std::string> Client::Submit(const v1::JobSpec& spec, const std::string& request_id) {
  absl::Status valid = ValidateJobSpec(spec, LimitsLifted(), /*check_path=*/nullptr);
  if (!valid.ok()) return valid;
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  // The same for each retry of this submission.
  request.set_request_id(request_id.empty() ? RandomToken() : request_id);
  auto response = Call(&v1::JobService::Stub::SubmitJob, request);
  if (!response.ok()) return response.status();
  return response->job_id();
}

absl::StatusOr<v1::Job> Client::Get(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  return Call(&v1::JobService::Stub::GetJob, request);
}

template <typename Request, typename Response, typename Item>
absl::StatusOr<std::vector<Item>> Client::ReadPages(
    grpc::Status (v1::JobService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    Request request, const google::protobuf::RepeatedPtrField<Item>& (Response::*items)() const,
    size_t limit) {
  constexpr size_t kPage = 500;
  std::vector<Item> read;
  do {
    const size_t wanted = limit == 0 ? kPage : std::min(kPage, limit - read.size());
    request.set_page_size(static_cast<int32_t>(wanted));
    auto page = Call(method, request);
    if (!page.ok()) return page.status();
    read.insert(read.end(), ((*page).*items)().begin(), ((*page).*items)().end());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty() && (limit == 0 || read.size() < limit));
  return read;
}

absl::StatusOr<std::vector<v1::JobSummary>> Client::ListJobs(const JobFilter& filter) {
  v1::ListJobsRequest request;
  for (v1::JobState state : filter.states) request.add_states(state);
  request.set_submitter(filter.submitter);
  return ReadPages(&v1::JobService::Stub::ListJobs, request, &v1::ListJobsResponse::jobs,
                   filter.limit);
}

absl::StatusOr<v1::Job> Client::Cancel(const std::string& job_id) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  return Call(&v1::JobService::Stub::CancelJob, request);
}

absl::StatusOr<v1::HookSwitch> Client::SetCommHook(const std::string& job_id,
                                                   const v1::CommHook& hook) {
  v1::SetCommHookRequest request;
  request.set_job_id(job_id);
  *request.mutable_hook() = hook;
  return Call(&v1::JobService::Stub::SetCommHook, request, Repeatable::kNo);
}

absl::StatusOr<v1::Job> Client::Scale(const std::string& job_id, int32_t replicas) {
  v1::ScaleJobRequest request;
  request.set_job_id(job_id);
  request.set_replicas(replicas);
  return Call(&v1::JobService::Stub::ScaleJob, request);
}

absl::StatusOr<v1::Timeline> Client::GetTimeline(const std::string& job_id) {
  v1::GetTimelineRequest request;
  request.set_job_id(job_id);
  return Call(&v1::JobService::Stub::GetTimeline, request);
}

absl::StatusOr<std::vector<v1::WorkerInfo>> Client::ListWorkers(const WorkerFilter& filter) {
  v1::ListWorkersRequest request;
  for (v1::WorkerState state : filter.states) request.add_states(state);
  request.set_device(filter.device);
  return ReadPages(&v1::JobService::Stub::ListWorkers, request, &v1::ListWorkersResponse::workers,
                   filter.limit);
}

absl::StatusOr<v1::Job> Client::Watch(const std::string& job_id,
                                      const std::function<void(const v1::Job&)>& on_update,
                                      const std::function<void(const absl::Status&)>& on_lost) {
  return FollowJob(
      job_id,
      [&](const v1::Job& job) {
        on_update(job);
        return false;
      },
      on_lost, absl::InfiniteFuture());
}

absl::StatusOr<v1::Job> Client::WatchUntil(const std::string& job_id,
                                           const std::function<bool(const v1::Job&)>& done,
                                           absl::Time deadline) {
  return FollowJob(job_id, done, {}, deadline);
}

absl::StatusOr<v1::Job> Client::FollowJob(const std::string& job_id,
                                          const std::function<bool(const v1::Job&)>& on_update,
                                          const std::function<void(const absl::Status&)>& on_lost,
                                          absl::Time deadline) {
  if (!channel_status_.ok()) return channel_status_;
  WatchRetry retry(watch_budget_);
  std::optional<v1::Job> last;
  std::optional<absl::Status> last_loss;  // why the latest stream ended early
  while (true) {
    const grpc::Status status = WatchOnce(
        job_id,
        [&](const v1::Job& job) {
          retry.Updated();
          last = job;
          return on_update(job);
        },
        deadline);
    if (status.ok()) {
      // The stream ends after the job's final version, or the one `on_update` took.
      if (!last.has_value()) return absl::UnavailableError("the watch ended before any update");
      return *last;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      // A watch that never started says why (the coordinator had no room for it, say).
      if (!last.has_value() && last_loss.has_value()) return *last_loss;
      return absl::DeadlineExceededError(
          absl::StrCat("watching ", job_id, ": the deadline passed before the job got there"));
    }
    const std::optional<absl::Duration> pause = retry.After(status.error_code(), now);
    if (!pause.has_value()) return Convert(status);
    last_loss = Convert(status);
    if (on_lost) on_lost(*last_loss);
    thread_local absl::BitGen random;
    absl::SleepFor(std::min(*pause * absl::Uniform(random, 0.5, 1.0), deadline - now));
  }
}

grpc::Status Client::WatchOnce(const std::string& job_id,
                               const std::function<bool(const v1::Job&)>& on_update,
                               absl::Time deadline) {
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  grpc::ClientContext context;
  if (!token_.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  if (deadline != absl::InfiniteFuture()) context.set_deadline(absl::ToChronoTime(deadline));
  std::unique_ptr<grpc::ClientReader<v1::Job>> reader = stub_->WatchJob(&context, request);
  v1::Job job;
  while (reader->Read(&job)) {
    if (on_update(job)) {
      context.TryCancel();  // seen enough: the stream's end (CANCELLED) is ours
      (void)reader->Finish();
      return grpc::Status::OK;
    }
  }
  return reader->Finish();
}

}  // namespace shardwise
