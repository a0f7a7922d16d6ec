#include "server/job_manager.h"

#include <cstdio>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "server/scheduler.h"

namespace shardwise {

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(StateStore* store,
                                                               const Options& options) {
  ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store->LoadJobs());
  std::unique_ptr<JobManager> manager(new JobManager(store, options));
  absl::MutexLock lock(&manager->mu_);
  for (v1::Job& job : jobs) {
    int64_t number = 0;
    if (absl::SimpleAtoi(absl::StripPrefix(job.id(), "job-"), &number)) {
      manager->next_job_number_ = std::max(manager->next_job_number_, number + 1);
    }
    manager->order_.push_back(job.id());
    const std::string id = job.id();
    manager->jobs_[id].job = std::move(job);
  }
  for (const std::string& id : manager->order_) {
    RETURN_IF_ERROR(manager->RecoverAttemptLocked(id));
  }
  return manager;
}

// An attempt the previous coordinator was running. SCHEDULED: its ranks were joining
// through the rendezvous, which did not survive; re-queued (a worker still running it is
// told to abort when it reconnects). RUNNING: its ranks train on without a coordinator
// and re-attach (JobController), so it stays RUNNING. Either way a hook switch still
// being agreed is abandoned: no rank was told to commit it (the decision is written
// before it is sent), and re-attached ranks are told it was abandoned.
absl::Status JobManager::RecoverAttemptLocked(const std::string& id) {
  const v1::Job& job = jobs_[id].job;
  const bool scheduled = job.state() == v1::SCHEDULED;
  const bool proposing = std::any_of(
      job.hook_switches().begin(), job.hook_switches().end(),
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
        for (v1::HookSwitch& pending : *j->mutable_hook_switches()) {
          if (pending.state() != v1::HookSwitch::PROPOSED) continue;
          pending.set_state(v1::HookSwitch::ABANDONED);
          pending.set_reason("the coordinator restarted before every rank answered");
        }
        return absl::OkStatus();
      },
      reason, OnStoreFailure::kRefuse);
  return recovered.status();
}

absl::Status JobManager::CheckAttempt(const v1::Job& job, int32_t attempt) const {
  if (attempt != kAnyAttempt && attempt != job.attempt()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " is at attempt ",
                                                      job.attempt(), ", not ", attempt));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> JobManager::Mutate(const std::string& job_id,
                                           absl::FunctionRef<absl::Status(v1::Job*)> mutate,
                                           const std::string& event_message,
                                           OnStoreFailure on_failure) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  Entry& entry = it->second;
  v1::Job updated = entry.unsaved.value_or(entry.job);
  RETURN_IF_ERROR(mutate(&updated));
  updated.set_update_time_ms(NowMs());
  std::vector<v1::JobEvent> events = entry.unsaved_events;
  if (!event_message.empty()) {
    v1::JobEvent event;
    event.set_time_ms(updated.update_time_ms());
    event.set_attempt(updated.attempt());
    event.set_state(updated.state());
    event.set_message(event_message);
    *updated.add_events() = event;
    events.push_back(event);
  }
  const absl::Status saved = store_->SaveJob(updated, events);
  if (saved.ok()) {
    entry.job = std::move(updated);
    entry.unsaved.reset();
    entry.unsaved_events.clear();
    ++entry.version;
    entry.last_persisted_progress = absl::Now();
    return entry.job;
  }
  if (on_failure == OnStoreFailure::kRefuse) {
    return absl::UnavailableError(
        absl::StrCat("the coordinator cannot write its state file: ", saved.message()));
  }
  if (!entry.unsaved.has_value()) {
    entry.unsaved_since = absl::Now();
    entry.unsaved_error = std::string(saved.message());
    std::fprintf(stderr, "shardwise-coordinator: cannot write job %s to the state file (%s); "
                 "retrying\n", job_id.c_str(), entry.unsaved_error.c_str());
  }
  entry.unsaved = updated;
  entry.unsaved_events = std::move(events);
  return updated;
}

absl::Status JobManager::SaveUnsaved(Entry& entry) {
  v1::Job job = *entry.unsaved;
  // The record says what happened; the event goes to the store with the change.
  v1::JobEvent note;
  note.set_time_ms(NowMs());
  note.set_attempt(job.attempt());
  note.set_state(job.state());
  note.set_message(absl::StrCat(
      "this change reached the state file ",
      absl::FormatDuration(absl::Trunc(absl::Now() - entry.unsaved_since, absl::Seconds(1))),
      " late: the coordinator could not write it (", entry.unsaved_error, ")"));
  std::vector<v1::JobEvent> events = entry.unsaved_events;
  events.push_back(note);
  *job.add_events() = note;
  RETURN_IF_ERROR(store_->SaveJob(job, events));
  entry.job = std::move(job);
  entry.unsaved.reset();
  entry.unsaved_events.clear();
  ++entry.version;
  entry.last_persisted_progress = absl::Now();
  return absl::OkStatus();
}

int JobManager::RetryUnsavedChanges(absl::Status* last_error) {
  absl::MutexLock lock(&mu_);
  int left = 0;
  for (auto& [id, entry] : jobs_) {
    if (!entry.unsaved.has_value()) continue;
    const absl::Status saved = SaveUnsaved(entry);
    if (saved.ok()) continue;
    ++left;
    if (last_error != nullptr) *last_error = saved;
  }
  return left;
}

absl::StatusOr<v1::Job> JobManager::Submit(const v1::JobSpec& spec,
                                           const v1::MemoryEstimate& memory_per_rank) {
  absl::MutexLock lock(&mu_);
  const std::string id = absl::StrCat("job-", next_job_number_);
  v1::Job job;
  job.set_id(id);
  *job.mutable_spec() = spec;
  job.set_state(v1::PENDING);
  job.set_reason(PendingReason(spec.world_size(), spec.device()));
  job.set_create_time_ms(NowMs());
  job.mutable_progress()->set_total_steps(spec.steps());
  *job.mutable_memory_per_rank() = memory_per_rank;
  // Saved through Mutate like every other change, from an empty placeholder.
  jobs_[id].job.set_id(id);
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
  ++next_job_number_;
  order_.push_back(id);
  return saved;
}

absl::Status JobManager::SetPendingReason(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.job.state() != v1::PENDING ||
      it->second.job.reason() == reason) {
    return absl::OkStatus();
  }
  return Mutate(
             job_id,
             [&](v1::Job* j) {
               j->set_reason(reason);
               return absl::OkStatus();
             },
             "")
      .status();
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  return it->second.job;
}

std::vector<v1::Job> JobManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> jobs;
  for (const std::string& id : order_) jobs.push_back(jobs_.at(id).job);
  return jobs;
}

std::vector<v1::Job> JobManager::Pending() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> jobs;
  for (const std::string& id : order_) {
    // As the job stands for the scheduler: with a change the store has not taken yet.
    const Entry& entry = jobs_.at(id);
    const v1::Job& job = entry.unsaved.has_value() ? *entry.unsaved : entry.job;
    if (job.state() == v1::PENDING) jobs.push_back(job);
  }
  return jobs;
}

absl::StatusOr<v1::Job> JobManager::Schedule(const std::string& job_id,
                                             const std::vector<v1::RankAssignment>& ranks) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  const int32_t attempt = it->second.job.attempt() + 1;
  std::string placement;
  for (const auto& r : ranks) {
    absl::StrAppend(&placement, placement.empty() ? "" : ", ", "rank ", r.rank(), " on ",
                    r.worker_id());
  }
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        if (j->state() != v1::PENDING) {
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", job_id, " is ", v1::JobState_Name(j->state()), ", not PENDING"));
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
        return absl::OkStatus();
      },
      "running: every rank joined the data plane");
}

absl::StatusOr<v1::Job> JobManager::Finish(const std::string& job_id, int32_t attempt,
                                           v1::JobState final_state, const std::string& reason,
                                           const std::string& result) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        if (IsTerminal(j->state())) {
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", job_id, " already ended as ", v1::JobState_Name(j->state())));
        }
        j->set_state(final_state);
        j->set_reason(reason);
        if (!result.empty()) j->set_result(result);
        return absl::OkStatus();
      },
      reason);
}

absl::StatusOr<v1::Job> JobManager::Requeue(const std::string& job_id, int32_t attempt,
                                            const std::string& reason, bool counts_as_restart) {
  absl::MutexLock lock(&mu_);
  return Mutate(
      job_id,
      [&](v1::Job* j) {
        RETURN_IF_ERROR(CheckAttempt(*j, attempt));
        if (j->state() != v1::SCHEDULED && j->state() != v1::RUNNING) {
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", job_id, " is ", v1::JobState_Name(j->state()), "; only a scheduled or "
              "running job can be re-queued"));
        }
        j->set_state(v1::PENDING);
        j->set_reason(reason);
        j->clear_ranks();
        if (counts_as_restart) j->set_restarts(j->restarts() + 1);
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

absl::StatusOr<v1::Job> JobManager::RecordExecutionPlan(const std::string& job_id,
                                                        int32_t attempt,
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

absl::Status JobManager::UpdateProgress(const std::string& job_id, int32_t attempt,
                                        const v1::Progress& progress) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  Entry& entry = it->second;
  const v1::Job& current = entry.unsaved.has_value() ? *entry.unsaved : entry.job;
  RETURN_IF_ERROR(CheckAttempt(current, attempt));
  if (IsTerminal(current.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " has ended"));
  }
  *entry.job.mutable_progress() = progress;
  ++entry.version;
  // Progress is shown at once; an unsaved change takes it along when it is written.
  if (entry.unsaved.has_value()) {
    *entry.unsaved->mutable_progress() = progress;
    return absl::OkStatus();
  }
  if (absl::Now() - entry.last_persisted_progress < options_.progress_persist_interval) {
    return absl::OkStatus();
  }
  entry.last_persisted_progress = absl::Now();
  return store_->SaveJob(entry.job);
}

absl::StatusOr<v1::Job> JobManager::WaitForChange(const std::string& job_id,
                                                  uint64_t* seen_version,
                                                  absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = jobs_.find(job_id);
    return it == jobs_.end() || it->second.version != *seen_version;
  };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  if (it->second.version == *seen_version) {
    return absl::DeadlineExceededError(absl::StrCat("job ", job_id, " did not change"));
  }
  *seen_version = it->second.version;
  return it->second.job;
}

}  // namespace shardwise
