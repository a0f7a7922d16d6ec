#include "server/job_calls.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/printable_text.h"
#include "common/status_macros.h"

namespace shardwise {
namespace {

// Job ids are the coordinator's ("job-17"); anything much longer, or unprintable, is no
// job's, and is refused showing only a cut, escaped form of it.
constexpr int64_t kMaxJobIdCharacters = 64;

absl::Status CheckJobId(const std::string& job_id) {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id: must not be empty");
  const absl::StatusOr<int64_t> length = CountPrintableCharacters(job_id);
  if (!length.ok() || *length > kMaxJobIdCharacters) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id: '", ShownValue(job_id, 64), "' is not a job id"));
  }
  return absl::OkStatus();
}

// A call's answer: its result moved into `response`, or its error.
template <typename T>
grpc::Status Answer(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

absl::StatusOr<size_t> PageSize(int32_t requested) {
  if (requested < 0 || requested > JobCalls::kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", requested, " is not in [0, ",
                                                   JobCalls::kMaxPageSize, "] (0 means ",
                                                   JobCalls::kDefaultPageSize, ")"));
  }
  return requested == 0 ? JobCalls::kDefaultPageSize : requested;
}

// A state filter lists each state at most once: more values than any state enum has
// would only make each job's test against the list (under the jobs' lock) longer.
constexpr int kMaxFilterValues = 16;

absl::Status CheckEnums(const char* field, const google::protobuf::RepeatedField<int>& values,
                        bool (*is_valid)(int)) {
  if (values.size() > kMaxFilterValues) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", values.size(), " values; at most ",
                                                   kMaxFilterValues, " (each state once)"));
  }
  for (int value : values) {
    if (!is_valid(value)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": unknown value ", value));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Principal> JobCalls::Caller(const grpc::ServerContextBase& context, Action action,
                                           const char* what) const {
  if (tokens_ == nullptr) return Principal();
  auto principal = tokens_->Authenticate(context);
  if (!principal.ok()) return principal.status();
  if (absl::Status allowed = Authorize(*principal, action, what); !allowed.ok()) return allowed;
  return principal;
}

absl::Status JobCalls::CallerMayChange(const grpc::ServerContextBase& context,
                                       const std::string& job_id, const char* what) const {
  // Who calls first, as for every call: an unauthenticated caller learns nothing else.
  if (tokens_ == nullptr) return CheckJobId(job_id);
  auto principal = tokens_->Authenticate(context);
  if (!principal.ok()) return principal.status();
  // A role that may change no job is refused before the job is looked up, so it cannot
  // tell which ids exist.
  if (principal->role < Role::kSubmitter) {
    return Authorize(*principal, Action::kChangeJob, what, "");
  }
  RETURN_IF_ERROR(CheckJobId(job_id));
  auto job = jobs_->Get(job_id);
  if (!job.ok()) return job.status();
  return Authorize(*principal, Action::kChangeJob, what, job->submitter());
}

grpc::Status JobCalls::SubmitJob(const grpc::ServerContextBase& context,
                                 const v1::SubmitJobRequest& request,
                                 v1::SubmitJobResponse* response) {
  auto caller = Caller(context, Action::kSubmit, "submit jobs");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  auto job =
      controller_->Submit(request.spec(), {caller->name, caller->paths}, request.request_id(),
                          [&context] { return context.IsCancelled(); });
  // Checking the files a job names can take a few hundred megabytes for a moment (a
  // checkpoint's headers); glibc keeps freed memory in its arenas unless asked to return
  // it. Only then: trimming locks each arena in turn, which a burst of submissions of
  // jobs naming no files would pay for nothing.
  const v1::InitSpec::SourceCase init = request.spec().init().source_case();
  if ((init != v1::InitSpec::SOURCE_NOT_SET && init != v1::InitSpec::kSeed) ||
      request.spec().data().has_tokens()) {
    ::malloc_trim(0);
  }
  if (!job.ok()) return ToGrpcStatus(job.status());
  response->set_job_id(job->id());
  return grpc::Status::OK;
}

grpc::Status JobCalls::GetJob(const grpc::ServerContextBase& context,
                              const v1::GetJobRequest& request, v1::Job* response) {
  if (auto caller = Caller(context, Action::kRead, "read jobs"); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  if (absl::Status id = CheckJobId(request.job_id()); !id.ok()) return ToGrpcStatus(id);
  return Answer(jobs_->Get(request.job_id()), response);
}

grpc::Status JobCalls::ListJobs(const grpc::ServerContextBase& context,
                                const v1::ListJobsRequest& request,
                                v1::ListJobsResponse* response) {
  if (auto caller = Caller(context, Action::kRead, "list jobs"); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  auto page_size = PageSize(request.page_size());
  if (!page_size.ok()) return ToGrpcStatus(page_size.status());
  const absl::Status states = CheckEnums("states", request.states(), v1::JobState_IsValid);
  if (!states.ok()) return ToGrpcStatus(states);
  JobManager::ListFilter filter;
  for (int state : request.states()) filter.states.push_back(static_cast<v1::JobState>(state));
  filter.submitter = request.submitter();
  auto page = jobs_->List(filter, request.page_token(), *page_size);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (v1::JobSummary& job : page->jobs) *response->add_jobs() = std::move(job);
  response->set_next_page_token(page->next_page_token);
  return grpc::Status::OK;
}

grpc::Status JobCalls::CancelJob(const grpc::ServerContextBase& context,
                                 const v1::CancelJobRequest& request, v1::Job* response) {
  if (absl::Status allowed = CallerMayChange(context, request.job_id(), "cancel jobs");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return Answer(controller_->Cancel(request.job_id()), response);
}

grpc::Status JobCalls::SetCommHook(const grpc::ServerContextBase& context,
                                   const v1::SetCommHookRequest& request,
                                   v1::HookSwitch* response) {
  if (absl::Status allowed =
          CallerMayChange(context, request.job_id(), "change the communication hook of jobs");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return Answer(controller_->SetCommHook(request.job_id(), request.hook()), response);
}

grpc::Status JobCalls::ScaleJob(const grpc::ServerContextBase& context,
                                const v1::ScaleJobRequest& request, v1::Job* response) {
  if (absl::Status allowed = CallerMayChange(context, request.job_id(), "scale jobs");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return Answer(controller_->Scale(request.job_id(), request.replicas()), response);
}

grpc::Status JobCalls::GetTimeline(const grpc::ServerContextBase& context,
                                   const v1::GetTimelineRequest& request, v1::Timeline* response) {
  if (auto caller = Caller(context, Action::kRead, "read timelines"); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  if (absl::Status id = CheckJobId(request.job_id()); !id.ok()) return ToGrpcStatus(id);
  return Answer(controller_->GetTimeline(request.job_id()), response);
}

absl::StatusOr<std::string> JobCalls::Watcher(const grpc::ServerContextBase& context,
                                              const v1::WatchJobRequest& request) const {
  ASSIGN_OR_RETURN(const Principal caller, Caller(context, Action::kRead, "watch jobs"));
  RETURN_IF_ERROR(CheckJobId(request.job_id()));
  return caller.name;
}

std::function<absl::Status()> JobCalls::WatchStillAllowed(
    const grpc::ServerContextBase& context) const {
  if (tokens_ == nullptr) return nullptr;
  const absl::StatusOr<std::string> token = TokenAuthenticator::BearerToken(context);
  if (!token.ok()) return nullptr;  // WatchAllowed refused it already
  return [tokens = tokens_, token = *token]() -> absl::Status {
    ASSIGN_OR_RETURN(const Principal principal, tokens->Authenticate(token));
    return Authorize(principal, Action::kRead, "watch jobs");
  };
}

grpc::Status JobCalls::ListWorkers(const grpc::ServerContextBase& context,
                                   const v1::ListWorkersRequest& request,
                                   v1::ListWorkersResponse* response) {
  if (auto caller = Caller(context, Action::kRead, "list workers"); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  auto page_size = PageSize(request.page_size());
  if (!page_size.ok()) return ToGrpcStatus(page_size.status());
  absl::Status valid = CheckEnums("states", request.states(), v1::WorkerState_IsValid);
  if (valid.ok() && !v1::DeviceKind_IsValid(request.device())) {
    valid = absl::InvalidArgumentError(absl::StrCat("device: unknown value ", request.device()));
  }
  if (!valid.ok()) return ToGrpcStatus(valid);
  const auto& states = request.states();
  const v1::DeviceKind device = request.device();
  bool more = false;
  std::vector<v1::WorkerInfo> workers = workers_->List(
      request.page_token(), *page_size,
      [&](const v1::WorkerInfo& worker) {
        if (device != v1::DEVICE_KIND_UNSPECIFIED && worker.device() != device) return false;
        return states.empty() ||
               std::find(states.begin(), states.end(), worker.state()) != states.end();
      },
      &more);
  if (more) response->set_next_page_token(workers.back().id());
  for (v1::WorkerInfo& worker : workers) *response->add_workers() = std::move(worker);
  return grpc::Status::OK;
}

}  // namespace shardwise
