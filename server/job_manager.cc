#include "server/job_manager.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/printable_text.h"
#include "common/random_token.h"
#include "common/status_macros.h"
#include "common/token_hash.h"
#include "contracts/job_ranks.h"
#include "contracts/job_summary.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/job_record_bound.h"

namespace shardwise {
namespace {

// Marks every switch still PROPOSED as ABANDONED for `reason`: no rank was told to commit
// it, as a decision is written before it is sent.
void AbandonProposedSwitches(v1::Job* job, const std::string& reason) {
  for (v1::HookSwitch& pending : *job->mutable_hook_switches()) {
    if (pending.state() != v1::HookSwitch::PROPOSED) continue;
    pending.set_state(v1::HookSwitch::ABANDONED);
    pending.set_reason(reason);
  }
}

// One key per submitter and request id (a NUL cannot occur in either: both are printable).
std::string SubmitKey(const std::string& submitter, const std::string& request_id) {
  return absl::StrCat(submitter, std::string(1, '\0'), request_id);
}

// "job-12" -> 12; 0 for an id of another shape.
int64_t JobNumber(const std::string& job_id) {
  int64_t number = 0;
  if (!absl::SimpleAtoi(absl::StripPrefix(job_id, "job-"), &number)) return 0;
  return number;
}

// The job as it stands for the controller: with a change the store has not taken yet;
// null once it ended and was written.
template <typename Entry>
const v1::Job* CurrentOf(const Entry& entry) {
  if (entry.unsaved.has_value()) return &*entry.unsaved;
  return entry.job.has_value() ? &*entry.job : nullptr;
}

bool Matches(const JobManager::ListFilter& filter, const v1::JobSummary& job) {
  if (!filter.states.empty() &&
      std::find(filter.states.begin(), filter.states.end(), job.state()) == filter.states.end()) {
    return false;
  }
  return filter.submitter.empty() || filter.submitter == job.submitter();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(StateStore* store,
                                                               const Options& options) {
  ASSIGN_OR_RETURN(StateStore::Loaded loaded, store->LoadJobs());
  std::unique_ptr<JobManager> manager(new JobManager(store, options));
  absl::MutexLock lock(&manager->mu_);
  for (v1::JobSummary& summary : loaded.ended) {
    const std::string id = summary.id();
    manager->jobs_[id].summary = std::move(summary);
    manager->AddJobLocked(id);
  }
  std::vector<std::string> live;
  for (v1::Job& job : loaded.live) {
    const std::string id = job.id();
    Entry& entry = manager->jobs_[id];
    entry.summary = Summarize(job);
    entry.job = std::move(job);
    manager->AddJobLocked(id);
    live.push_back(id);
  }
  for (const std::string& id : live) RETURN_IF_ERROR(manager->RecoverAttemptLocked(id));
  return manager;
}

void JobManager::AddJobLocked(const std::string& job_id) {
  const v1::JobSummary& summary = jobs_[job_id].summary;
  if (!summary.submit_request_id().empty()) {
    by_request_[SubmitKey(summary.submitter(), summary.submit_request_id())] = job_id;
  }
  const int64_t number = JobNumber(job_id);
  order_[number] = job_id;
  next_job_number_ = std::max(next_job_number_, number + 1);
}

// An attempt the previous coordinator was running. SCHEDULED: its ranks were joining
// through the rendezvous, which did not survive; re-queued (a worker still running it is
// told to abort when it reconnects). RUNNING: its ranks train on without a coordinator
// and re-attach (JobController), so it stays RUNNING. Either way a hook switch still
// being agreed is abandoned: no rank was told to commit it (the decision is written
// before it is sent), and re-attached ranks are told it was abandoned.
absl::Status JobManager::RecoverAttemptLocked(const std::string& id) {
  const v1::Job& job = *jobs_[id].job;
  const bool scheduled = job.state() == v1::SCHEDULED;
  const bool proposing =
      std::any_of(job.hook_switches().begin(), job.hook_switches().end(),
                  [](const v1::HookSwitch& s) { return s.state() == v1::HookSwitch::PROPOSED; });
  if (!scheduled && !(job.state() == v1::RUNNING && proposing)) return absl::OkStatus();
  const std::string reason =
      scheduled ? absl::StrCat("coordinator restarted while attempt ", job.attempt(),
                               " was SCHEDULED; re-queued as a new attempt")
                : "the coordinator restarted before every rank answered the comm hook switch; "
                  "abandoned";
  auto recovered = Mutate(
      id,
      [&](v1::Job* j) {
        if (scheduled) {
          j->set_state(v1::PENDING);
          j->set_reason(reason);
          j->clear_ranks();
        }
        AbandonProposedSwitches(j, "the coordinator restarted before every rank answered");
        return absl::OkStatus();
      },
      reason, OnStoreFailure::kRefuse);
  return recovered.status();
}

absl::Status JobManager::CheckAttempt(const v1::Job& job, int32_t attempt) const {
  if (attempt != kAnyAttempt && attempt != job.attempt()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " is at attempt ", job.attempt(), ", not ", attempt));
  }
  return absl::OkStatus();
}

void JobManager::Publish(Entry& entry, v1::Job job) {
  entry.summary = Summarize(job);
  entry.unsaved.reset();
  entry.unsaved_events.clear();
  entry.progress_unsaved = false;  // the record written carries the newest progress
  ++entry.version;
  MarkChangedLocked(job.id());
  // A job that ended lives on in the state file; memory keeps its summary.
  if (IsTerminal(job.state())) {
    entry.job.reset();
  } else {
    entry.job = std::move(job);
  }
}

absl::StatusOr<v1::Job> JobManager::Mutate(const std::string& job_id,
                                           absl::FunctionRef<absl::Status(v1::Job*)> mutate,
                                           const std::string& event_message,
                                           OnStoreFailure on_failure) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return NoSuchJobLocked(job_id);
  Entry& entry = it->second;
  if (!entry.unsaved.has_value() && !entry.job.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " already ended as ",
                                                      v1::JobState_Name(entry.summary.state())));
  }
  v1::Job updated = entry.unsaved.value_or(*entry.job);
  RETURN_IF_ERROR(mutate(&updated));
  updated.set_update_time_ms(clock_.NowMs());
  std::vector<v1::JobEvent> events = entry.unsaved_events;
  if (!event_message.empty()) {
    v1::JobEvent event;
    event.set_time_ms(updated.update_time_ms());
    event.set_attempt(updated.attempt());
    event.set_state(updated.state());
    event.set_message(event_message);
    *updated.add_events() = event;
    BoundJobEvents(&updated);
    events.push_back(event);
  }
  const absl::Status saved = store_->SaveJob(updated, events);
  if (saved.ok()) {
    Publish(entry, updated);
    return updated;
  }
  if (on_failure == OnStoreFailure::kRefuse) {
    return absl::UnavailableError(
        absl::StrCat("the coordinator cannot write its state file: ", saved.message()));
  }
  if (!entry.unsaved.has_value()) {
    entry.unsaved_since = clock_.Now();
    entry.unsaved_error = std::string(saved.message());
    LogError(LogContext().Job(job_id), absl::StrCat("cannot write the job to the state file (",
                                                    entry.unsaved_error, "); retrying"));
  }
  entry.unsaved = updated;
  entry.unsaved_events = std::move(events);
  return updated;
}

absl::Status JobManager::SaveUnsaved(Entry& entry) {
  v1::Job job = *entry.unsaved;
  // The record says what happened; the event goes to the store with the change.
  v1::JobEvent note;
  note.set_time_ms(clock_.NowMs());
  note.set_attempt(job.attempt());
  note.set_state(job.state());
  note.set_message(absl::StrCat(
      "this change reached the state file ",
      absl::FormatDuration(absl::Trunc(clock_.Now() - entry.unsaved_since, absl::Seconds(1))),
      " late: the coordinator could not write it (", entry.unsaved_error, ")"));
  std::vector<v1::JobEvent> events = entry.unsaved_events;
  events.push_back(note);
  *job.add_events() = note;
  BoundJobEvents(&job);
  RETURN_IF_ERROR(store_->SaveJob(job, events));
  Publish(entry, std::move(job));
  return absl::OkStatus();
}

int JobManager::RetryUnsavedChanges(absl::Status* last_error) {
  absl::MutexLock lock(&mu_);
  int left = 0;
  bool refused = false;
  for (auto& [id, entry] : jobs_) {
    if (!entry.unsaved.has_value()) continue;
    // After a refusal the others wait for the next round: each write to a file another
    // connection holds waits out the busy timeout (5 s), all under this lock, which every
    // report and client call needs.
    if (!refused) {
      const absl::Status saved = SaveUnsaved(entry);
      if (saved.ok()) continue;
      refused = true;
      if (last_error != nullptr) *last_error = saved;
    }
    ++left;
  }
  return left;
}

std::vector<std::string> JobManager::DescribeUnsavedChanges() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> lines;
  for (const auto& [id, entry] : jobs_) {
    if (!entry.unsaved.has_value()) continue;
    const std::string written =
        entry.job.has_value() ? v1::JobState_Name(entry.job->state()) : "none";
    const std::string last_event =
        entry.unsaved_events.empty()
            ? ""
            : absl::StrCat(", last event '", entry.unsaved_events.back().message(), "'");
    lines.push_back(absl::StrCat(
        "job ", id, ": ", v1::JobState_Name(entry.unsaved->state()), " (the state file holds ",
        written, last_event, "), unwritten since ",
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", entry.unsaved_since, absl::UTCTimeZone()), ": ",
        entry.unsaved_error));
  }
  return lines;
}

absl::Status JobManager::FlushProgress() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> moved;
  for (const auto& [id, entry] : jobs_) {
    // An unsaved change carries the progress along when it is written.
    if (entry.progress_unsaved && entry.job.has_value() && !entry.unsaved.has_value()) {
      moved.push_back(*entry.job);
    }
  }
  if (moved.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(store_->SaveJobs(moved));
  for (const v1::Job& job : moved) jobs_[job.id()].progress_unsaved = false;
  return absl::OkStatus();
}

absl::StatusOr<int> JobManager::Compact(absl::Duration retention) {
  const int64_t cutoff = absl::ToUnixMillis(clock_.Now() - retention);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const std::vector<std::string> compacted, store_->CompactEndedBefore(cutoff));
  for (const std::string& id : compacted) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) it->second.summary.set_compacted(true);
  }
  return static_cast<int>(compacted.size());
}

absl::StatusOr<int> JobManager::Forget(absl::Duration after) {
  const int64_t cutoff = absl::ToUnixMillis(clock_.Now() - after);
  absl::MutexLock lock(&mu_);
  if (order_.empty()) return 0;
  ASSIGN_OR_RETURN(const std::vector<std::string> forgotten,
                   store_->ForgetEndedBefore(cutoff, order_.rbegin()->second));
  for (const std::string& id : forgotten) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    const v1::JobSummary& summary = it->second.summary;
    if (!summary.submit_request_id().empty()) {
      auto made = by_request_.find(SubmitKey(summary.submitter(), summary.submit_request_id()));
      if (made != by_request_.end() && made->second == id) by_request_.erase(made);
    }
    order_.erase(JobNumber(id));
    changed_.erase(id);
    jobs_.erase(it);
  }
  return static_cast<int>(forgotten.size());
}

absl::Status JobManager::NoSuchJobLocked(const std::string& job_id) const {
  // Numbers are given in order and never twice, so a lower one missing was forgotten.
  const int64_t number = JobNumber(job_id);
  const bool forgotten =
      number > 0 && number < next_job_number_ && absl::StrCat("job-", number) == job_id;
  return absl::NotFoundError(
      absl::StrCat("no job with id '", job_id, "'",
                   forgotten ? ": it ended long ago and was forgotten (the coordinator's "
                               "--forget_jobs_after_hours)"
                             : ""));
}

absl::StatusOr<v1::Job> JobManager::Submit(const v1::JobSpec& spec,
                                           const v1::MemoryEstimate& memory_per_rank,
                                           const std::string& submitter,
                                           const std::string& request_id,
                                           const v1::SubmitterRoots& submitter_roots,
                                           const std::string& submitted_spec_sha256) {
  std::string earlier;
  {
    absl::MutexLock lock(&mu_);
    auto found =
        request_id.empty() ? by_request_.end() : by_request_.find(SubmitKey(submitter, request_id));
    if (found == by_request_.end()) {
      v1::Job job;
      *job.mutable_spec() = spec;
      *job.mutable_memory_per_rank() = memory_per_rank;
      job.set_submitter(submitter);
      job.set_submit_request_id(request_id);
      job.set_submitted_spec_sha256(submitted_spec_sha256);
      if (!submitter_roots.principal().empty()) *job.mutable_submitter_roots() = submitter_roots;
      return SubmitLocked(std::move(job));
    }
    earlier = found->second;
  }
  return EarlierSubmission(earlier, spec, request_id, submitted_spec_sha256);
}

std::string SubmittedSpecSha256(const v1::JobSpec& spec) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    spec.SerializeToCodedStream(&coded);
  }  // the coded stream writes its last bytes as it ends
  return Sha256Hex(bytes);
}

absl::StatusOr<std::optional<v1::Job>> JobManager::FindSubmission(
    const std::string& submitter, const std::string& request_id,
    const std::string& submitted_spec_sha256) const {
  if (request_id.empty()) return std::nullopt;
  std::string earlier;
  {
    absl::MutexLock lock(&mu_);
    auto found = by_request_.find(SubmitKey(submitter, request_id));
    if (found == by_request_.end()) return std::nullopt;
    earlier = found->second;
  }
  ASSIGN_OR_RETURN(const v1::Job job, Get(earlier));
  if (job.submitted_spec_sha256().empty() && !job.compacted()) return std::nullopt;
  return EarlierSubmission(earlier, job.spec(), request_id, submitted_spec_sha256);
}

absl::StatusOr<v1::Job> JobManager::EarlierSubmission(
    const std::string& job_id, const v1::JobSpec& spec, const std::string& request_id,
    const std::string& submitted_spec_sha256) const {
  ASSIGN_OR_RETURN(v1::Job job, Get(job_id));
  const bool both_fingerprinted =
      !job.submitted_spec_sha256().empty() && !submitted_spec_sha256.empty();
  const bool same = both_fingerprinted
                        ? job.submitted_spec_sha256() == submitted_spec_sha256
                        : google::protobuf::util::MessageDifferencer::Equals(job.spec(), spec);
  if (!job.compacted() && !same) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id '", request_id, "' already made ", job_id,
                     ", with another spec; a new job needs a new request_id"));
  }
  return job;
}

absl::StatusOr<v1::Job> JobManager::SubmitLocked(v1::Job job) {
  const std::string id = absl::StrCat("job-", next_job_number_);
  job.set_id(id);
  // Ids repeat across state files; what the job writes names this too (Job.uid).
  job.set_uid(RandomToken(16));
  job.set_state(v1::PENDING);
  job.set_reason(PendingReason(job.spec().world_size(), job.spec().device()));
  job.set_create_time_ms(clock_.NowMs());
  job.mutable_progress()->set_total_steps(job.spec().steps());
  // Saved through Mutate like every other change, from an empty placeholder.
  jobs_[id].job.emplace().set_id(id);
  auto saved = Mutate(
      id,
      [&](v1::Job* j) {
        *j = job;
        return absl::OkStatus();
      },
      "submitted", OnStoreFailure::kRefuse);
  if (!saved.ok()) {
    jobs_.erase(id);
    return saved.status();
  }
  AddJobLocked(id);
  if (!job.submit_request_id().empty()) {
    by_request_[SubmitKey(job.submitter(), job.submit_request_id())] = id;
  }
  return saved;
}

void JobManager::SetPendingReason(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.job.has_value()) return;
  Entry& entry = it->second;
  if (entry.job->state() != v1::PENDING || entry.job->reason() == reason) return;
  entry.job->set_reason(reason);
  if (entry.unsaved.has_value()) entry.unsaved->set_reason(reason);
  entry.summary.set_reason(reason);
  ++entry.version;
  MarkChangedLocked(job_id);
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) const {
  uint64_t version = 0;
  return Get(job_id, &version);
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id, uint64_t* version) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return NoSuchJobLocked(job_id);
    *version = it->second.version;
    if (it->second.job.has_value()) return *it->second.job;
  }
  // It ended: nothing changes it any more but compaction, so it is read without the lock.
  return store_->LoadJob(job_id);
}

absl::StatusOr<v1::Job> JobManager::Current(const std::string& job_id) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return NoSuchJobLocked(job_id);
    if (it->second.unsaved.has_value()) return *it->second.unsaved;
  }
  return Get(job_id);
}

absl::StatusOr<JobManager::Page> JobManager::List(const ListFilter& filter,
                                                  const std::string& page_token,
                                                  size_t page_size) const {
  int64_t after = 0;
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &after) || after < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("page_token: '", ShownValue(page_token),
                                                   "' is not a token from a previous page"));
  }
  absl::MutexLock lock(&mu_);
  Page page;
  size_t read = 0;
  for (auto it = order_.upper_bound(after); it != order_.end(); ++it) {
    if (read++ == list_scan_limit_) {
      // The number of the last job read: the next page goes on after it.
      page.next_page_token = absl::StrCat(std::prev(it)->first);
      break;
    }
    const v1::JobSummary& summary = jobs_.at(it->second).summary;
    if (!Matches(filter, summary)) continue;
    if (page.jobs.size() == page_size) {
      // The number of the last job listed: the next page starts after it.
      page.next_page_token = absl::StrCat(JobNumber(page.jobs.back().id()));
      break;
    }
    page.jobs.push_back(summary);
  }
  return page;
}

std::vector<v1::Job> JobManager::Live() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> live;
  for (const auto& [number, id] : order_) {
    const Entry& entry = jobs_.at(id);
    if (entry.job.has_value()) live.push_back(*entry.job);
  }
  return live;
}

std::map<v1::JobState, int64_t> JobManager::CountByState() const {
  absl::MutexLock lock(&mu_);
  std::map<v1::JobState, int64_t> counts;
  for (v1::JobState state :
       {v1::PENDING, v1::SCHEDULED, v1::RUNNING, v1::SUCCEEDED, v1::FAILED, v1::CANCELLED}) {
    counts[state] = 0;
  }
  for (const auto& [id, entry] : jobs_) ++counts[entry.summary.state()];
  return counts;
}

absl::Status JobManager::SaveTimeline(const v1::Timeline& timeline) {
  return store_->SaveTimeline(timeline);
}

absl::StatusOr<v1::Timeline> JobManager::LoadTimeline(const std::string& job_id) const {
  return store_->LoadTimeline(job_id);
}

absl::Status JobManager::SaveQuarantine(const StoredQuarantine& quarantine) {
  return store_->SaveQuarantine(quarantine);
}

absl::StatusOr<std::vector<StoredQuarantine>> JobManager::LoadQuarantines() const {
  return store_->LoadQuarantines(absl::ToUnixMillis(clock_.Now()));
}

absl::Status JobManager::ForgetEndedQuarantines() {
  return store_->ForgetEndedQuarantines(absl::ToUnixMillis(clock_.Now()));
}

std::vector<PendingJob> JobManager::PendingJobs() const {
  absl::MutexLock lock(&mu_);
  std::vector<PendingJob> pending;
  for (const auto& [number, id] : order_) {
    // As the job stands for the scheduler: with a change the store has not taken yet.
    const v1::Job* job = CurrentOf(jobs_.at(id));
    if (job == nullptr || job->state() != v1::PENDING) continue;
    pending.push_back(PendingJobOf(*job));
  }
  return pending;
}

absl::StatusOr<v1::Job> JobManager::Schedule(const std::string& job_id,
                                             const std::vector<v1::RankAssignment>& ranks) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return NoSuchJobLocked(job_id);
  const v1::Job* current = CurrentOf(it->second);
  const int32_t attempt = (current != nullptr ? current->attempt() : 0) + 1;
  std::string placement;
  for (const auto& r : ranks) {
    absl::StrAppend(&placement, placement.empty() ? "" : ", ", "rank ", r.rank(), " on ",
                    r.worker_id());
  }
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        if (j->state() != v1::PENDING) {
          return absl::FailedPreconditionError(
              absl::StrCat("job ", job_id, " is ", v1::JobState_Name(j->state()), ", not PENDING"));
        }
        j->set_state(v1::SCHEDULED);
        j->set_attempt(attempt);
        j->clear_ranks();
        for (const auto& r : ranks) *j->add_ranks() = r;
        j->set_reason(absl::StrCat("attempt ", attempt, ": ranks joining the data plane"));
        return absl::OkStatus();
      },
      absl::StrCat("attempt ", attempt, " scheduled: ", placement));
}

absl::StatusOr<v1::Job> JobManager::MarkRunning(const std::string& job_id, int32_t attempt) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        if (j->state() != v1::SCHEDULED) {
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", job_id, " is ", v1::JobState_Name(j->state()), ", not SCHEDULED"));
        }
        j->set_state(v1::RUNNING);
        j->set_reason(absl::StrCat("attempt ", attempt, ": every rank joined the data plane"));
        j->set_requeues_since_running(0);
        return absl::OkStatus();
      },
      "running: every rank joined the data plane");
}

absl::StatusOr<v1::Job> JobManager::Finish(const std::string& job_id, int32_t attempt,
                                           v1::JobState final_state, const std::string& reason,
                                           const std::string& result) {
  absl::MutexLock lock(&mu_);
  return FinishLocked(job_id, attempt, final_state, reason, result, OnStoreFailure::kDefer);
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  return FinishLocked(job_id, kAnyAttempt, v1::CANCELLED, reason, "", OnStoreFailure::kRefuse);
}

absl::StatusOr<v1::Job> JobManager::FinishLocked(const std::string& job_id, int32_t attempt,
                                                 v1::JobState final_state,
                                                 const std::string& reason,
                                                 const std::string& result,
                                                 OnStoreFailure on_failure) {
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        if (IsTerminal(j->state())) {
          return absl::FailedPreconditionError(
              absl::StrCat("job ", job_id, " already ended as ", v1::JobState_Name(j->state())));
        }
        j->set_state(final_state);
        j->set_reason(reason);
        if (!result.empty()) j->set_result(result);
        // A cancellation is written before its attempt ends (JobController::Cancel): a
        // switch still being agreed is decided in the same write, as no rank commits it.
        AbandonProposedSwitches(j, absl::StrCat("the job ended (", v1::JobState_Name(final_state),
                                                ") before every rank answered"));
        return absl::OkStatus();
      },
      reason, on_failure);
}

absl::StatusOr<v1::Job> JobManager::Requeue(const std::string& job_id, int32_t attempt,
                                            const std::string& reason, bool counts_as_restart) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        if (j->state() != v1::SCHEDULED && j->state() != v1::RUNNING) {
          return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is ",
                                                            v1::JobState_Name(j->state()),
                                                            "; only a scheduled or "
                                                            "running job can be re-queued"));
        }
        j->set_state(v1::PENDING);
        j->set_reason(reason);
        j->clear_ranks();
        if (counts_as_restart) j->set_restarts(j->restarts() + 1);
        j->set_requeues_since_running(counts_as_restart ? 0 : j->requeues_since_running() + 1);
        return absl::OkStatus();
      },
      reason);
}

absl::StatusOr<v1::Job> JobManager::RecordEvent(const std::string& job_id, int32_t attempt,
                                                const std::string& event_message) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id, [&](v1::Job* j) { return CheckAttempt(*j, attempt); }, event_message);
}

absl::StatusOr<JobManager::Entry*> JobManager::LiveEntryLocked(const std::string& job_id,
                                                               int32_t attempt) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return NoSuchJobLocked(job_id);
  Entry& entry = it->second;
  const v1::Job* current = entry.unsaved.has_value() ? &*entry.unsaved
                           : entry.job.has_value()   ? &*entry.job
                                                     : nullptr;
  if (current == nullptr || IsTerminal(current->state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " has ended"));
  }
  RETURN_IF_ERROR(CheckAttempt(*current, attempt));
  return &entry;
}

absl::Status JobManager::RecordCompletion(const std::string& job_id, int32_t attempt, int32_t rank,
                                          bool led, const std::string& result) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Entry * live, LiveEntryLocked(job_id, attempt));
  Entry& entry = *live;
  const auto add = [&](v1::Job* job) {
    v1::AttemptCompletion* completion = job->mutable_completion();
    if (completion->attempt() != job->attempt()) {
      completion->Clear();
      completion->set_attempt(job->attempt());
    }
    completion->add_ranks(rank);
    if (led) {
      completion->set_led(true);
      completion->set_result(result);
    }
  };
  if (led) {
    // Written at once: the leader wrote the job's outputs, and a coordinator restarted
    // without its completion would run the attempt again (or, in a fault-tolerant one,
    // fail it for a lost leader). One synced write per attempt.
    const auto complete = [&](v1::Job* job) {
      add(job);
      return absl::OkStatus();
    };
    return Mutate(job_id, complete, /*event_message=*/"").status();
  }
  add(&*entry.job);
  if (entry.unsaved.has_value()) add(&*entry.unsaved);
  // The others' are written with the progress (FlushProgress, every second) or the job's
  // next change: a write per rank, each synced, would hold up the coordinator as a large
  // job ends.
  entry.progress_unsaved = true;
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> JobManager::RecordInitCheckpoint(const std::string& job_id, int32_t attempt,
                                                         int64_t step) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        // A worker's word, kept for the job's later attempts: only what can be true.
        if (j->spec().init().source_case() != v1::InitSpec::kCheckpointDir) {
          return absl::FailedPreconditionError(
              absl::StrCat("job ", job_id, " starts from no init.checkpoint_dir"));
        }
        if (step < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("a checkpoint's step is at least 0, got ", step));
        }
        if (j->has_init_checkpoint_step()) {
          return absl::FailedPreconditionError(
              absl::StrCat("job ", job_id, " started from init.checkpoint_dir's step ",
                           j->init_checkpoint_step(), " already"));
        }
        j->set_init_checkpoint_step(step);
        return absl::OkStatus();
      },
      absl::StrCat("started from init.checkpoint_dir's checkpoint of step ", step,
                   ": a restart without a checkpoint of the job's own starts from it too"));
}

absl::StatusOr<v1::Job> JobManager::RecordExecutionPlan(const std::string& job_id, int32_t attempt,
                                                        const v1::ExecutionOrder& order,
                                                        const v1::PrefetchPlan& plan,
                                                        const std::string& event_message) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        *j->mutable_execution_order() = order;
        *j->mutable_prefetch_plan() = plan;
        return absl::OkStatus();
      },
      event_message);
}

absl::StatusOr<v1::Job> JobManager::RecordHookSwitch(const std::string& job_id,
                                                     const v1::HookSwitch& hook_switch,
                                                     const std::string& event_message,
                                                     bool durable) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        if (IsTerminal(j->state())) {
          return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " has ended"));
        }
        for (v1::HookSwitch& existing : *j->mutable_hook_switches()) {
          if (existing.version() == hook_switch.version()) {
            existing = hook_switch;
            return absl::OkStatus();
          }
        }
        *j->add_hook_switches() = hook_switch;
        return absl::OkStatus();
      },
      event_message, durable ? OnStoreFailure::kRefuse : OnStoreFailure::kDefer);
}

absl::StatusOr<v1::Job> JobManager::RecordMembership(
    const std::string& job_id, const v1::Membership& membership, const std::string& event_message,
    const std::vector<v1::RankAssignment>& reassigned) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, membership.attempt()));
        for (const v1::RankAssignment& rank : reassigned) {
          if (rank.rank() < 0 || rank.rank() >= JobRanks(j->spec())) {
            return absl::InvalidArgumentError(
                absl::StrCat("job ", job_id, " has no rank ", rank.rank()));
          }
        }
        for (const v1::RankAssignment& rank : reassigned) {
          // A job grown past its initial size: its list of ranks grows with it.
          while (j->ranks_size() <= rank.rank()) j->add_ranks()->set_rank(j->ranks_size() - 1);
          *j->mutable_ranks(rank.rank()) = rank;
        }
        *j->mutable_membership() = membership;
        v1::MembershipEpoch* epoch = j->add_membership_history();
        epoch->set_attempt(membership.attempt());
        epoch->set_epoch(membership.epoch());
        *epoch->mutable_live_ranks() = membership.live_ranks();
        epoch->set_decided_at_step(j->progress().step());
        epoch->set_time_ms(clock_.NowMs());
        epoch->set_cause(event_message);
        BoundMembershipHistory(j);
        return absl::OkStatus();
      },
      event_message, OnStoreFailure::kRefuse);
}

absl::StatusOr<v1::Job> JobManager::RecordEpochStart(const std::string& job_id, int32_t attempt,
                                                     int32_t epoch, int64_t step) {
  absl::MutexLock lock(&mu_);
  // Said once, as an event too: the record keeps the first and the newest epochs only
  // (job_record_bound.h), the state file every event, so the events hold the whole history
  // a run is reproduced from. Set by the mutation, which Mutate runs before reading it.
  std::string event;
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        for (int i = j->membership_history_size() - 1; i >= 0; --i) {
          v1::MembershipEpoch* entry = j->mutable_membership_history(i);
          if (entry->attempt() != attempt || entry->epoch() != epoch) continue;
          if (entry->has_first_step()) break;
          entry->set_first_step(step);
          event = absl::StrCat("membership epoch ", epoch, " trains from step ", step,
                               " (decided at step ", entry->decided_at_step(), "): ranks ",
                               absl::StrJoin(entry->live_ranks(), ", "));
          return absl::OkStatus();
        }
        // Nothing to record: no write.
        return absl::AlreadyExistsError(absl::StrCat("attempt ", attempt, "'s epoch ", epoch,
                                                     " has its first step, or no entry"));
      },
      event, OnStoreFailure::kDefer);
}

absl::StatusOr<v1::Job> JobManager::SetTargetReplicas(const std::string& job_id, int32_t replicas,
                                                      const std::string& event_message) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        j->set_target_replicas(replicas);
        return absl::OkStatus();
      },
      event_message, OnStoreFailure::kRefuse);
}

void JobManager::KeepNewestCheckpointLocked(Entry& entry, int64_t step) {
  const v1::Job& job = *entry.job;
  // A worker's word: only a step the job can have written. The newest of any attempt's:
  // one that resumed from an older step (a newer one damaged) leaves the record as it is.
  if (step < 0 || step > job.spec().steps() || job.spec().output().checkpoint_dir().empty() ||
      (job.has_checkpoint_step() && step <= job.checkpoint_step())) {
    return;
  }
  entry.job->set_checkpoint_step(step);
  if (entry.unsaved.has_value()) entry.unsaved->set_checkpoint_step(step);
  entry.progress_unsaved = true;
  ++entry.version;
  MarkChangedLocked(job.id());
}

absl::Status JobManager::RecordCheckpointStep(const std::string& job_id, int32_t attempt,
                                              int64_t step) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Entry * live, LiveEntryLocked(job_id, attempt));
  KeepNewestCheckpointLocked(*live, step);
  return absl::OkStatus();
}

absl::Status JobManager::UpdateProgress(const std::string& job_id, int32_t attempt,
                                        const v1::Progress& progress) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Entry * live, LiveEntryLocked(job_id, attempt));
  Entry& entry = *live;
  *entry.job->mutable_progress() = progress;
  if (entry.unsaved.has_value()) *entry.unsaved->mutable_progress() = progress;
  if (progress.has_checkpoint_step()) KeepNewestCheckpointLocked(entry, progress.checkpoint_step());
  entry.summary.set_step(progress.step());
  entry.summary.set_total_steps(progress.total_steps());
  entry.summary.set_loss(progress.loss());
  entry.summary.set_loss_step(progress.loss_step());
  entry.progress_unsaved = true;
  ++entry.version;
  MarkChangedLocked(job_id);
  return absl::OkStatus();
}

void JobManager::MarkChangedLocked(const std::string& job_id) {
  changed_.insert(job_id);
  jobs_changed_.NotifyAll();
}

std::vector<std::string> JobManager::ChangedJobs(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !changed_.empty(); };
  jobs_changed_.AwaitWithTimeout(mu_, any, timeout);
  std::vector<std::string> changed(changed_.begin(), changed_.end());
  changed_.clear();
  return changed;
}

absl::StatusOr<v1::Job> JobManager::WaitForChange(const std::string& job_id, uint64_t* seen_version,
                                                  absl::Duration timeout) const {
  {
    absl::MutexLock lock(&mu_);
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = jobs_.find(job_id);
      return it == jobs_.end() || it->second.version != *seen_version;
    };
    mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return NoSuchJobLocked(job_id);
    if (it->second.version == *seen_version) {
      return absl::DeadlineExceededError(absl::StrCat("job ", job_id, " did not change"));
    }
  }
  return Get(job_id, seen_version);
}

}  // namespace shardwise
