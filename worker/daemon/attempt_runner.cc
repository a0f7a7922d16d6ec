#include "worker/daemon/attempt_runner.h"

#include <cstdio>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/path_policy.h"
#include "common/status_macros.h"
#include "contracts/job_identity.h"
#include "contracts/permanent_failure.h"
#include "tokenizer/manifest.h"
#include "worker/comm/grpc_rendezvous_store.h"
#include "worker/daemon/assignment_check.h"
#include "worker/daemon/resume_check.h"
#include "worker/daemon/system_failure.h"
#include "worker/train/final_model_owner.h"
#include "worker/train/trainer.h"

namespace shardwise {

AttemptRunner::AttemptRunner(std::shared_ptr<grpc::Channel> channel,
                             const v1::Assignment& assignment, const DataPlaneOptions& data_plane,
                             std::shared_ptr<TrainingHooks> hooks, RankDeviceFactory make_device,
                             MemoryProbes memory, std::optional<PathPolicy> path_ceiling,
                             Reporter report, CollectiveMetrics* collective_metrics)
    : channel_(std::move(channel)),
      assignment_(assignment),
      data_plane_(data_plane),
      faults_(std::move(hooks)),
      make_device_(std::move(make_device)),
      available_memory_(std::move(memory.available)),
      path_ceiling_(std::move(path_ceiling)),
      report_(std::move(report)),
      collective_metrics_(collective_metrics),
      allocator_(std::move(memory.host_headroom)),
      position_(assignment.rank()),
      thread_([this] { Run(); }) {}

AttemptRunner::~AttemptRunner() {
  Abort("worker shutting down");
  thread_.join();
}

void AttemptRunner::Abort(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (abort_reason_.empty()) abort_reason_ = reason;
  if (!abort_) aborted_at_ = Clock::Real().Now();
  abort_ = true;
}

v1::HookChangeAck AttemptRunner::OnHookChange(const v1::HookChange& change) {
  v1::HookChangeAck ack;
  ack.set_job_id(change.job_id());
  ack.set_attempt(change.attempt());
  ack.set_rank(assignment_.rank());
  ack.set_version(change.version());
  ack.set_accepted(hooks_.Propose(change.version(), change.step(), change.hook()));
  ack.set_started_step(hooks_.started_step());
  return ack;
}

void AttemptRunner::OnHookDecision(const v1::HookDecision& decision) {
  hooks_.Decide(decision.version(), decision.commit());
}

bool AttemptRunner::Leave(const std::string& reason, bool worker_stops) {
  if (!assignment_.spec().has_fault_tolerance()) return false;
  {
    absl::MutexLock lock(&mu_);
    if (leave_reason_.empty()) leave_reason_ = reason;
  }
  if (worker_stops) worker_stops_ = true;
  leave_ = true;
  return true;
}

v1::AttemptReport AttemptRunner::NewReport(v1::AttemptPhase phase) const {
  v1::AttemptReport report;
  report.set_job_id(assignment_.job_id());
  report.set_attempt(assignment_.attempt());
  report.set_rank(assignment_.rank());
  report.set_phase(phase);
  return report;
}

void AttemptRunner::Report(v1::AttemptPhase phase, const std::string& message,
                           v1::Progress progress, bool permanent) {
  v1::AttemptReport report = NewReport(phase);
  report.set_permanent(permanent);
  Report(std::move(report), message, std::move(progress));
}

void AttemptRunner::Report(v1::AttemptReport report, const std::string& message,
                           v1::Progress progress) {
  const v1::AttemptPhase phase = report.phase();
  report.set_message(message);
  // A rank that left because its worker is shutting down: the worker is not free again.
  report.set_worker_leaving(phase == v1::ABORTED && worker_stops_.load());
  progress.set_total_steps(assignment_.spec().steps());
  *report.mutable_progress() = std::move(progress);
  // The spans ride on the reports the publisher sends anyway: batched, off the step.
  int64_t dropped = 0;
  for (v1::Span& span : timeline_.Drain(&dropped)) *report.add_spans() = std::move(span);
  report.set_spans_dropped(dropped);
  report_(report);
}

void AttemptRunner::PublishProgress() {
  while (true) {
    std::optional<v1::Progress> progress;
    {
      absl::MutexLock lock(&progress_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress_mu_) {
        return training_over_ || pending_progress_.has_value();
      };
      progress_mu_.Await(absl::Condition(&ready));
      if (!pending_progress_.has_value()) return;  // training over, nothing left
      progress = std::move(pending_progress_);
      pending_progress_.reset();
    }
    Report(v1::PROGRESS, "", *progress);
  }
}

absl::Status AttemptRunner::CheckMemory() const {
  if (!available_memory_) return absl::OkStatus();
  absl::StatusOr<int64_t> available = available_memory_();
  if (!available.ok()) {
    LogWarning(LogContext().Job(job_id()).Attempt(attempt()),
               absl::StrCat("not checking memory: ", available.status().message()));
    return absl::OkStatus();
  }
  return CheckRankMemory(spec_, assignment_.rank(), *available, DataFileBytes(spec_));
}

absl::StatusOr<v1::JobSpec> AttemptRunner::CheckPaths() const {
  // Without the coordinator's roots (an older coordinator, or one without a policy),
  // only the worker's bound the paths, if it has some; they are made canonical on this
  // worker's file system all the same, as the readers expect (kCheckedPathLinks).
  const PathPolicy sent = assignment_.has_path_policy()
                              ? PathPolicy::FromProto(assignment_.path_policy())
                              : *PathPolicy::Create({"/"}, {"/"}, "/");
  const PathPolicy policy = path_ceiling_.has_value() ? sent.Within(*path_ceiling_) : sent;
  v1::JobSpec spec = assignment_.spec();
  if (!spec.output().overwrite()) {
    // A final model an earlier attempt of this job wrote is the job's own to replace
    // (final_model_owner.h), not a file that "exists already". Looked at only once the
    // paths are canonical and inside the roots.
    v1::JobSpec owned = spec;
    owned.mutable_output()->set_overwrite(true);
    RETURN_IF_ERROR(PermanentUnlessTransient(ApplyPathPolicy(policy, PathCheck::kOnDisk, &owned)));
    const std::string& model = owned.output().final_model_path();
    if (WrittenByJob(model, JobIdentity{job_id(), assignment_.job_uid()})) {
      LogInfo(
          LogContext().Job(job_id()).Attempt(attempt()),
          absl::StrCat("'", model,
                       "' was written by an earlier attempt of this job; this one replaces it"));
      owned.mutable_output()->set_overwrite(false);
      return owned;
    }
  }
  RETURN_IF_ERROR(PermanentUnlessTransient(ApplyPathPolicy(policy, PathCheck::kOnDisk, &spec)));
  return spec;
}

absl::Status AttemptRunner::CheckResumable() const {
  const std::string& dir = spec_.output().checkpoint_dir();
  if (!assignment_.has_checkpoint_step() || dir.empty()) return absl::OkStatus();
  return CheckTheJobsCheckpointsAreHere(dir, JobIdentity{job_id(), assignment_.job_uid()},
                                        assignment_.checkpoint_step());
}

absl::Status AttemptRunner::CheckTokenizer() const {
  // As the coordinator checked it at submission: it may have changed since, and a FIFO put
  // there would hold the copy beside the final model, after the last step, forever.
  const std::string& dir = spec_.data().tokens().tokenizer();
  if (dir.empty()) return absl::OkStatus();
  absl::StatusOr<tokenizer::Manifest> folder =
      tokenizer::CheckTokenizerFolder(dir, kCheckedPathLinks);
  if (folder.ok()) return absl::OkStatus();
  // A folder this host cannot read now (an NFS hiccup, no descriptor left) fails this
  // attempt only: the coordinator checked it at submission.
  return JobFieldFailure("job.data.tokens.tokenizer", folder.status());
}

namespace {

v1::Progress Phase(const char* name) {
  v1::Progress progress;
  progress.set_phase(name);
  return progress;
}

}  // namespace

void AttemptRunner::Fail(const absl::Status& status) {
  std::string message(status.message());
  if (abort_) {
    absl::MutexLock lock(&mu_);
    message = absl::StrCat("aborted: ", abort_reason_);
  }
  // An abort the coordinator asked for (a cancel, a lost peer) is not this rank's error,
  // nor is leaving with its group (a fault-tolerant job's membership).
  const bool own_error = !abort_ && !absl::IsAborted(status);
  Log(own_error ? LogLevel::kError : LogLevel::kWarning,
      LogContext().Job(job_id()).Attempt(attempt()).Rank(rank()), message);
  v1::AttemptReport report = NewReport(v1::ABORTED);
  report.set_permanent(!abort_ && IsPermanent(status));
  report.set_worker_fault(!abort_ && IsThisWorkersFault(status));
  report.set_inputs_missing(!abort_ && IsMissingInput(status));
  Report(std::move(report), message, Phase("aborted"));
  done_ = true;
  finished_.Notify();
}

void AttemptRunner::Run() {
  if (absl::Status runnable = CheckAssignment(assignment_); !runnable.ok()) return Fail(runnable);
  const int rank = assignment_.rank();
  const int size = assignment_.world_size();
  DataPlaneOptions options = data_plane_;
  if (assignment_.collective_timeout_ms() > 0) {
    options.timeout = std::chrono::milliseconds(assignment_.collective_timeout_ms());
  }
  LogInfo(LogContext().Job(job_id()).Attempt(attempt()).Rank(rank),
          absl::StrCat("rank ", rank, " of ", size, " joining the data plane"));

  // Before joining: a rank that cannot fit, or may not open the job's files, fails at
  // once, and its peers are aborted.
  // From here on the spec as checked: its paths canonical on this worker's file system.
  absl::StatusOr<v1::JobSpec> checked = CheckPaths();
  if (!checked.ok()) return Fail(checked.status());
  spec_ = *std::move(checked);
  if (absl::Status tokenizer = CheckTokenizer(); !tokenizer.ok()) return Fail(tokenizer);
  if (absl::Status resumable = CheckResumable(); !resumable.ok()) return Fail(resumable);
  if (absl::Status memory = CheckMemory(); !memory.ok()) return Fail(memory);

  if (faults_ != nullptr && faults_->StayOutOfRendezvous()) {
    while (!abort_) absl::SleepFor(absl::Milliseconds(50));  // an injected fault: tests only
    return Fail(absl::AbortedError("aborted before joining the rendezvous"));
  }
  v1::RendezvousScope scope;
  scope.set_job_id(assignment_.job_id());
  scope.set_attempt(assignment_.attempt());
  scope.set_token(assignment_.rendezvous_token());
  GrpcRendezvousStore store(channel_, scope, options.timeout, &abort_);
  // A replacement connects the epoch it joins inside training, with the live ranks.
  std::shared_ptr<gloo::Context> context;
  if (assignment_.has_join()) {
    Report(v1::JOINED, absl::StrCat("joining membership epoch ", assignment_.join().epoch()),
           Phase("bootstrap"));
  } else {
    auto connected = ConnectGlooContext(store, rank, size, options);
    if (!connected.ok()) return Fail(connected.status());
    auto sum = VerifyDataPlane(*connected);
    if (!sum.ok()) return Fail(sum.status());
    if (abort_) return Fail(absl::AbortedError("aborted"));
    Report(v1::JOINED, absl::StrCat("all-reduce of ranks gave ", *sum), Phase("bootstrap"));
    context = *std::move(connected);
  }

  v1::Progress last_progress = Phase("training");
  const absl::StatusOr<TrainingResult> result =
      TrainPublishingProgress(MakeTrainingContext(&store, context, options, &last_progress));
  // The model is gone: what it held goes back to the system now, not when the next job
  // comes (an idle worker holding its last job's peak starves its neighbours on the host).
  allocator_.ReleaseCache();
  if (!result.ok()) return Fail(result.status());
  last_progress.set_phase("completed");
  LogInfo(LogContext().Job(job_id()).Attempt(attempt()).Rank(rank), result->Summary());
  v1::AttemptReport completed = NewReport(v1::COMPLETED);
  completed.set_led(result->led);
  Report(std::move(completed), result->Summary(), last_progress);
  done_ = true;
  finished_.Notify();
}

TrainingContext AttemptRunner::MakeTrainingContext(GrpcRendezvousStore* store,
                                                   std::shared_ptr<gloo::Context> world,
                                                   const DataPlaneOptions& options,
                                                   v1::Progress* last_progress) {
  TrainingContext training;
  training.job_id = assignment_.job_id();
  training.job_uid = assignment_.job_uid();
  training.attempt = assignment_.attempt();
  if (assignment_.has_init_checkpoint_step()) {
    training.init_checkpoint_step = assignment_.init_checkpoint_step();
  }
  if (assignment_.has_checkpoint_step()) {
    training.own_checkpoint_step = assignment_.checkpoint_step();
  }
  training.rank = assignment_.rank();
  training.world_size = assignment_.world_size();
  training.store = store;
  training.world = std::move(world);
  training.data_plane = options;
  training.abort = &abort_;
  training.allocator = &allocator_;
  training.make_device = make_device_;
  // Switches applied before this attempt (a restarted job replays them).
  for (const v1::HookSwitch& done : assignment_.hook_switches()) {
    if (done.state() == v1::HookSwitch::APPLIED) hooks_.AddCommitted(done.step(), done.new_hook());
  }
  training.hook_schedule = &hooks_;
  training.plans = &plans_;
  if (assignment_.spec().has_fault_tolerance()) {
    training.membership = &membership_;
    if (assignment_.has_join()) {
      training.join = &assignment_.join();
      training.join_wait = std::chrono::milliseconds(assignment_.join_wait_ms());
      membership_.Deliver(assignment_.join());  // the epoch it trains in, as the others hold it
    }
    training.leave = &leave_;
    training.on_steps_started = [this] { stepping_ = true; };
    training.on_state_received = [this](const v1::StateTransfer& transfer) {
      v1::AttemptReport report = NewReport(v1::STATE_RECEIVED);
      *report.mutable_transfer() = transfer;
      report_(report);
    };
    training.on_epoch_started = [this](int32_t epoch, int64_t first_step) {
      v1::AttemptReport report = NewReport(v1::EPOCH_STARTED);
      report.set_epoch(epoch);
      report.set_step(first_step);
      report_(report);
    };
    training.on_leaving = [this](int64_t step) {
      std::string reason;
      {
        absl::MutexLock lock(&mu_);
        reason = leave_ ? leave_reason_ : "--fault_injection asks it";
      }
      v1::Progress progress;
      progress.set_step(step);
      Report(v1::LEAVING, absl::StrCat(reason, "; it leaves with its group after step ", step),
             std::move(progress));
    };
  }
  training.position = &position_;
  training.timeline = &timeline_;
  training.collective_metrics = collective_metrics_;
  // Once per attempt (and once more on a change): off the steady-state critical path.
  training.on_execution_order = [this](const v1::ExecutionOrder& order, int64_t step,
                                       bool changed) {
    v1::AttemptReport report = NewReport(changed ? v1::ORDER_CHANGED : v1::ORDER_RECORDED);
    *report.mutable_execution_order() = order;
    report.set_step(step);
    report_(report);
  };
  training.on_progress = [this, last_progress](const v1::Progress& progress) {
    *last_progress = progress;
    absl::MutexLock lock(&progress_mu_);
    pending_progress_ = progress;
  };
  return training;
}

absl::StatusOr<TrainingResult> AttemptRunner::TrainPublishingProgress(
    const TrainingContext& training) {
  std::thread publisher;
  try {
    publisher = std::thread([this] { PublishProgress(); });
  } catch (const std::system_error& failure) {
    return SystemFailureStatus(failure);
  }
  absl::StatusOr<TrainingResult> result = absl::UnknownError("not run");
  try {
    result = Train(spec_, training, faults_.get());
  } catch (const std::bad_alloc& failure) {
    // A job too large for this worker fails its attempt; the worker serves on.
    result = AllocationFailureStatus(failure);
  } catch (const std::system_error& failure) {
    // The model's threads (its collectives' lanes, a reduction's) could not start.
    result = SystemFailureStatus(failure);
  }
  {
    absl::MutexLock lock(&progress_mu_);
    training_over_ = true;
  }
  publisher.join();
  return result;
}

}  // namespace shardwise
