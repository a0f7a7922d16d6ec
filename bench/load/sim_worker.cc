#include "bench/load/sim_worker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace shardwise::load {

void SimCounters::RecordSessionEnd(const std::string& worker, const grpc::Status& status) {
  ++sessions_ended;
  absl::MutexLock lock(&mu_);
  if (!first_session_end_.empty()) return;
  first_session_end_ = absl::StrCat(worker, ": ", FromGrpcStatus(status).ToString());
}

std::string SimCounters::FirstSessionEnd() const {
  absl::MutexLock lock(&mu_);
  return first_session_end_;
}

SimWorker::SimWorker(std::string name, v1::WorkerService::Stub* stub, const SimOptions& options,
                     SimCounters* counters, absl::Time first_heartbeat)
    : name_(std::move(name)), stub_(stub), options_(options), counters_(counters) {
  absl::MutexLock lock(&mu_);
  next_heartbeat_ = first_heartbeat;
}

void SimWorker::Start() {
  register_request_.set_name(name_);
  register_request_.set_device(v1::CPU);
  register_request_.set_cpu_threads(8);
  register_request_.set_memory_bytes(options_.memory_bytes);
  register_context_.set_wait_for_ready(true);
  stub_->async()->RegisterWorker(&register_context_, &register_request_, &register_response_,
                                 [this](const grpc::Status& status) {
                                   if (!status.ok()) {
                                     ++counters_->registration_failures;
                                     absl::MutexLock lock(&mu_);
                                     done_ = true;
                                     return;
                                   }
                                   ++counters_->registered;
                                   OpenSession();
                                 });
}

void SimWorker::OpenSession() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      done_ = true;
      return;
    }
  }
  // Binds the reactor to its stream: only then may anything be written (Tick writes once
  // open_ is set).
  stub_->async()->Session(&session_context_, this);
  {
    // The hello is queued as the session opens, under the same lock: a heartbeat from
    // the ticker in between would go first, and the coordinator ends a session whose
    // first message is not its hello.
    absl::MutexLock lock(&mu_);
    open_ = true;
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(register_response_.worker_id());
    QueueLocked(std::move(hello));
  }
  StartRead(&incoming_);
  StartCall();
}

void SimWorker::Send(v1::WorkerMessage message) {
  absl::MutexLock lock(&mu_);
  if (!open_) return;
  QueueLocked(std::move(message));
}

void SimWorker::QueueLocked(v1::WorkerMessage message) {
  outgoing_.push_back(std::move(message));
  if (writing_) return;
  writing_ = true;
  StartWrite(&outgoing_.front());  // never runs a reaction inline
}

void SimWorker::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  outgoing_.pop_front();
  if (!ok || outgoing_.empty()) {
    writing_ = false;
    if (!ok) outgoing_.clear();
    return;
  }
  StartWrite(&outgoing_.front());
}

v1::WorkerMessage SimWorker::Report(const Attempt& attempt, v1::AttemptPhase phase,
                                    int64_t step) const {
  v1::WorkerMessage message;
  v1::AttemptReport* report = message.mutable_report();
  report->set_job_id(attempt.job_id);
  report->set_attempt(attempt.attempt);
  report->set_rank(attempt.rank);
  report->set_phase(phase);
  report->set_step(step);
  // Rank 0 leads a simulated attempt (no rank is ever lost): it says so as it completes.
  report->set_led(phase == v1::COMPLETED && attempt.rank == 0);
  v1::Progress* progress = report->mutable_progress();
  progress->set_step(step);
  progress->set_total_steps(attempt.steps);
  progress->set_loss(2.0 / (1.0 + static_cast<double>(step)));
  progress->set_steps_per_second(1.0 / absl::ToDoubleSeconds(options_.step_time));
  progress->set_phase("training");
  if (phase == v1::ORDER_RECORDED) {
    // Two FSDP units: the root (1) first in pre-forward, last in post-forward.
    v1::ExecutionOrder* order = report->mutable_execution_order();
    order->add_pre_forward(1);
    order->add_pre_forward(0);
    order->add_post_forward(0);
    order->add_post_forward(1);
  }
  return message;
}

void SimWorker::OnAssignment(const v1::Assignment& assignment) {
  ++counters_->assignments;
  Attempt attempt;
  attempt.job_id = assignment.job_id();
  attempt.attempt = assignment.attempt();
  attempt.rank = assignment.rank();
  attempt.steps = assignment.spec().steps();
  attempt.started = absl::Now();
  attempt.next_progress = attempt.started;
  {
    absl::MutexLock lock(&mu_);
    attempt_ = attempt;
  }
  Send(Report(attempt, v1::JOINED, 0));
  Send(Report(attempt, v1::ORDER_RECORDED, 0));
  counters_->reports += 2;
}

void SimWorker::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended: OnDone follows
  if (incoming_.has_assignment()) {
    OnAssignment(incoming_.assignment());
  } else if (incoming_.has_abort()) {
    ++counters_->aborts;
    absl::MutexLock lock(&mu_);
    if (attempt_.has_value() && attempt_->job_id == incoming_.abort().job_id() &&
        attempt_->attempt == incoming_.abort().attempt()) {
      attempt_.reset();
    }
  } else if (incoming_.has_hook_change()) {
    v1::WorkerMessage ack;
    ack.mutable_hook_ack()->set_job_id(incoming_.hook_change().job_id());
    ack.mutable_hook_ack()->set_attempt(incoming_.hook_change().attempt());
    ack.mutable_hook_ack()->set_version(incoming_.hook_change().version());
    ack.mutable_hook_ack()->set_accepted(true);
    Send(std::move(ack));
  }
  StartRead(&incoming_);
}

void SimWorker::Tick(absl::Time now) {
  std::vector<v1::WorkerMessage> due;
  {
    absl::MutexLock lock(&mu_);
    if (!open_ || frozen_) return;
    std::optional<int64_t> step;
    if (attempt_.has_value()) {
      step = std::min(attempt_->steps,
                      static_cast<int64_t>((now - attempt_->started) / options_.step_time));
    }
    if (now >= next_heartbeat_) {
      next_heartbeat_ += options_.heartbeat_interval;
      if (next_heartbeat_ < now) next_heartbeat_ = now + options_.heartbeat_interval;
      v1::WorkerMessage heartbeat;
      heartbeat.mutable_heartbeat();  // an idle worker's is empty, but a heartbeat
      if (attempt_.has_value()) {
        heartbeat.mutable_heartbeat()->set_job_id(attempt_->job_id);
        heartbeat.mutable_heartbeat()->set_attempt(attempt_->attempt);
        v1::RankPosition* position = heartbeat.mutable_heartbeat()->mutable_position();
        position->set_rank(attempt_->rank);
        position->set_step(*step);
        position->set_phase("forward");
        position->set_unit(-1);
        position->set_collectives(*step * 10);
        for (int64_t lane : {*step * 4, *step * 3, *step * 3}) position->add_lane_collectives(lane);
      }
      due.push_back(std::move(heartbeat));
      last_heartbeat_ = now;
      ++counters_->heartbeats;
    }
    if (attempt_.has_value()) {
      if (*step >= attempt_->steps) {
        due.push_back(Report(*attempt_, v1::COMPLETED, *step));
        attempt_.reset();
        ++counters_->reports;
      } else if (attempt_->rank == 0 && now >= attempt_->next_progress) {
        attempt_->next_progress = now + options_.progress_interval;
        due.push_back(Report(*attempt_, v1::PROGRESS, *step));
        ++counters_->reports;
      }
    }
  }
  for (v1::WorkerMessage& message : due) Send(std::move(message));
}

void SimWorker::OnDone(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  if (open_) counters_->RecordSessionEnd(name_, status);
  open_ = false;
  done_ = true;
}

absl::Time SimWorker::Freeze() {
  absl::MutexLock lock(&mu_);
  frozen_ = true;
  return last_heartbeat_;
}

void SimWorker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    open_ = false;  // no more writes; counted as ended by us, not by the coordinator
  }
  session_context_.TryCancel();
  register_context_.TryCancel();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
}

}  // namespace shardwise::load
