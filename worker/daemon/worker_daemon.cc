#include "worker/daemon/worker_daemon.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/channel_credentials.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "contracts/data_plane_version.h"
#include "contracts/membership.h"
#include "contracts/permanent_failure.h"
#include "contracts/timeouts.h"
#include "contracts/worker_features.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "worker/daemon/system_failure.h"
#include "worker/runtime/critical_path.h"
#include "worker/runtime/host_cpus.h"
#include "worker/runtime/host_memory.h"

namespace shardwise {
namespace {

// How long a new assignment waits for an ending attempt (aborted, or reported) before it
// is refused.
constexpr absl::Duration kEndingAttemptGrace = absl::Seconds(5);
// On shutdown, how long the coordinator has to end the session after the worker's
// half-close before the worker cancels it.
constexpr absl::Duration kSessionCloseGrace = absl::Seconds(2);

// Where a registration that failed got to: a name not resolved or a handshake not done
// (CONNECTING), connections refused or dropped (TRANSIENT_FAILURE), or a connection that
// was up (READY: the coordinator itself did not answer).
const char* ChannelStateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN:
      return "SHUTDOWN";
  }
  return "in an unknown state";
}

}  // namespace

WorkerDaemon::WorkerDaemon(const WorkerOptions& options)
    : options_(options), token_(options.token) {
  if (options.metrics != nullptr) metrics_ = std::make_unique<WorkerMetrics>(options.metrics);
  auto listener = DataPlaneProbeListener::Start(options.data_plane.hostname);
  if (listener.ok()) {
    probe_listener_ = *std::move(listener);
  } else {
    LogWarning(LogContext(), absl::StrCat(listener.status().message(),
                                          "; the coordinator cannot tell whether peers reach "
                                          "this worker's data plane"));
  }
  Connect();
}

void WorkerDaemon::Connect() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect promptly after a coordinator restart; RunSession adds its own backoff.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC also gives each connection attempt at least this long (by default 20 s): an
  // attempt to an address that drops packets (a replaced pod's old IP) would otherwise
  // hold the channel for 20 s while the new coordinator is up, past the re-attach grace.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  // And a name resolved again at most every second, not 30 s: the replacement's address.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  // Its own connections: gRPC otherwise shares one connection (a subchannel, with its
  // reconnect backoff) among all channels of a process with the same target and
  // arguments, so the new channel of each session (Run) would inherit the state of the
  // one the running attempt keeps, failed connection attempts and backoff included.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ = grpc::CreateCustomChannel(options_.coordinator_address, options_.credentials, args);
  stub_ = v1::WorkerService::NewStub(channel_);
}

WorkerDaemon::~WorkerDaemon() {
  {
    absl::MutexLock lock(&probe_mu_);
    if (probe_thread_.joinable()) probe_thread_.join();
  }
  absl::MutexLock lock(&runner_mu_);
  runner_.reset();
}

void WorkerDaemon::Dispatch(const v1::CoordinatorMessage& message) {
  if (message.has_assignment()) OnAssignment(message.assignment());
  if (message.has_abort()) OnAbort(message.abort());
  if (message.has_hook_change()) OnHookChange(message.hook_change());
  if (message.has_plan_update()) OnPlanUpdate(message.plan_update());
  if (message.has_membership_change()) OnMembershipChange(message.membership_change());
  if (message.has_leave()) OnLeaveRequest(message.leave());
  if (message.has_hook_decision()) OnHookDecision(message.hook_decision());
  if (message.has_probe()) OnDataPlaneProbe(message.probe());
  if (message.has_going_away()) {
    LogWarning(LogContext(),
               absl::StrCat("the coordinator is going away (", message.going_away().reason(),
                            "); training goes on, and the worker reconnects at "
                            "once to re-attach to the next one"));
    coordinator_going_away_ = true;
  }
}

absl::Status WorkerDaemon::Run(const std::atomic<bool>& stop) {
  stop_ = &stop;
  absl::BitGen random;
  absl::Duration backoff = options_.min_backoff;
  absl::Status refused;
  while (!stop) {
    const absl::Time started = Clock::Real().Now();
    absl::Status status = RunSession();
    if (stop) break;
    if (IsPermanent(status)) {
      refused = status;
      break;
    }
    // Both read each time: a going-away said during a long session is used up here, not
    // left to shorten the next failed session's backoff.
    const bool going_away = coordinator_going_away_.exchange(false);
    if (going_away || Clock::Real().Now() - started > absl::Seconds(10))
      backoff = options_.min_backoff;
    LogWarning(LogContext(), absl::StrCat("session ended (", status.ToString(), "); retrying in ",
                                          absl::FormatDuration(backoff)));
    // Jitter keeps a fleet of workers from reconnecting in lockstep.
    const absl::Time until = Clock::Real().Now() + backoff * absl::Uniform(random, 0.5, 1.0);
    while (!stop && Clock::Real().Now() < until) absl::SleepFor(absl::Milliseconds(50));
    backoff = std::min(backoff * 2, options_.max_backoff);
    // A new channel for each new session: one whose name lookup failed (the coordinator's
    // pod gone from DNS while it is replaced) retries the lookup only after a backoff of
    // its own that grows to minutes, and was seen to keep a worker away for 30 s after
    // the new coordinator served. A running attempt keeps the channel it was given.
    Connect();
  }
  absl::MutexLock lock(&runner_mu_);
  if (runner_) {
    runner_->Abort("worker stopped");
    // Stopping, or refused by the coordinator: the process ends, and an attempt stuck in
    // a collective would hold its end until the collective's own timeout.
    if ((stop || !refused.ok()) && options_.exit_process &&
        !runner_->WaitUntilDone(absl::Seconds(1))) {
      LogWarning(LogContext().Job(runner_->job_id()).Attempt(runner_->attempt()),
                 "shutting down with the aborted attempt still inside a collective (a peer "
                 "frozen or unreachable): exiting without waiting for it");
      if (!refused.ok()) LogError(LogContext(), std::string(refused.message()));
      options_.exit_process(refused.ok() ? 0 : kExitRefused);
    }
  }
  runner_.reset();
  return refused;
}

// While the session is still open: the coordinator hears the attempt's ABORTED report
// and re-queues the job at once, rather than finding the worker gone. Bounded: an
// attempt stuck in a collective does not hold up the shutdown past the stuck-abort grace.
void WorkerDaemon::DrainForShutdown(absl::Duration heartbeat_interval) {
  constexpr char kReason[] = "the worker is shutting down (it was told to stop: SIGTERM or SIGINT)";
  if (LeftWithItsGroup(heartbeat_interval)) return;
  absl::MutexLock lock(&runner_mu_);
  if (!runner_ || runner_->done()) return;
  // The message names the job although the context does: deploy/local/run.sh's drain
  // check looks for "shutting down: aborting JOB" in the container's log.
  LogInfo(
      LogContext().Job(runner_->job_id()).Attempt(runner_->attempt()),
      absl::StrCat("shutting down: aborting ", runner_->job_id(), " attempt ", runner_->attempt()));
  // Said first: stopping the rank breaks its peers' connections, and their failures
  // would otherwise reach the coordinator before this rank's own report.
  v1::AttemptReport leaving;
  leaving.set_job_id(runner_->job_id());
  leaving.set_attempt(runner_->attempt());
  leaving.set_rank(runner_->rank());
  leaving.set_phase(v1::ABORTED);
  leaving.set_message(absl::StrCat("aborted: ", kReason));
  leaving.set_worker_leaving(true);
  // Not through SendReport: the rank's own final report, which follows, is the one the
  // metrics and the outbox keep. Not after it either: a rank that completed meanwhile
  // would be said to have left.
  v1::WorkerMessage message;
  *message.mutable_report() = std::move(leaving);
  WriteUnlessTheAttemptEnded(message);
  runner_->Abort(kReason);
  runner_->WaitUntilDone(std::max(options_.stuck_abort_grace, absl::Seconds(1)));
}

// A fault-tolerant attempt trains on without this rank's group: the group finishes its
// step and leaves, and nothing is redone. Bounded: a rank that has not left in time is
// stopped as any other. Watched without holding the runner's lock, which the session's
// messages for the attempt (an abort, a membership) need meanwhile.
bool WorkerDaemon::LeftWithItsGroup(absl::Duration heartbeat_interval) {
  {
    absl::MutexLock lock(&runner_mu_);
    if (!runner_ || runner_->done()) return true;
    // A rank not yet in its steps (joining, loading, a replacement waiting for the live
    // ranks) would hold the shutdown until the grace ran out: stopped at once instead.
    if (!runner_->stepping()) return false;
    if (!runner_->Leave("its worker is shutting down", /*worker_stops=*/true)) return false;
    LogInfo(LogContext().Job(runner_->job_id()).Attempt(runner_->attempt()),
            absl::StrCat("shutting down: leaving ", runner_->job_id(), " attempt ",
                         runner_->attempt(), " with its group after the step in flight"));
  }
  // On the monotonic clock, as SendHeartbeatsUntil.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + absl::ToChronoNanoseconds(options_.leave_grace);
  Clock::time_point next_heartbeat = Clock::now() + absl::ToChronoNanoseconds(heartbeat_interval);
  while (Clock::now() < deadline) {
    {
      absl::MutexLock lock(&runner_mu_);
      if (!runner_ || runner_->done()) return true;
    }
    if (Clock::now() >= next_heartbeat) {
      SendHeartbeat();
      next_heartbeat = Clock::now() + absl::ToChronoNanoseconds(heartbeat_interval);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void WorkerDaemon::SendHeartbeat() {
  v1::WorkerMessage message;
  *message.mutable_heartbeat() = CurrentHeartbeat();
  Send(message);
}

void WorkerDaemon::Authorize(grpc::ClientContext& context) const {
  if (!token_.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
}

void WorkerDaemon::RefreshToken() {
  if (options_.token_file.empty()) return;
  absl::StatusOr<std::string> token = ReadBearerToken("--token_file", options_.token_file);
  if (!token.ok()) {
    LogWarning(LogContext(),
               absl::StrCat("keeping the token read before: ", token.status().message()));
    return;
  }
  token_ = *std::move(token);
}

void WorkerDaemon::CloseSessionForWrites() {
  absl::MutexLock lock(&stream_mu_);
  if (stream_ == nullptr) return;
  stream_->WritesDone();
  stream_ = nullptr;  // later reports are held, as between sessions
}

v1::Heartbeat WorkerDaemon::CurrentHeartbeat() {
  v1::Heartbeat heartbeat;
  heartbeat.set_messages_read(session_reads_.load());
  heartbeat.set_stopping(Stopping());
  absl::MutexLock lock(&runner_mu_);
  if (runner_ && !runner_->done()) {
    heartbeat.set_job_id(runner_->job_id());
    heartbeat.set_attempt(runner_->attempt());
    *heartbeat.mutable_position() = runner_->position();
  }
  return heartbeat;
}

v1::RegisterWorkerRequest WorkerDaemon::Registration() {
  v1::RegisterWorkerRequest request;
  request.set_name(options_.name);
  request.set_device(options_.device);
  if (options_.device == v1::CUDA) *request.mutable_gpu() = options_.gpu;
  request.set_cpu_threads(HostCpuThreads());
  // Its container's limit, not the node's: the scheduler places by it.
  request.set_memory_bytes(HostMemoryCeiling());
  if (probe_listener_) request.set_data_probe_address(probe_listener_->address());
  request.add_features(kFeatureSubmitterFolders);
  request.set_data_plane_version(kDataPlaneVersion);
  // So that the coordinator places here only jobs these folders allow.
  if (options_.path_ceiling.has_value())
    *request.mutable_folders() = options_.path_ceiling->Folders();
  const std::optional<v1::RunningAttempt> running = AttemptToReattach();
  if (running.has_value()) *request.mutable_running() = *running;
  return request;
}

absl::Status WorkerDaemon::Register(const v1::RegisterWorkerRequest& request,
                                    v1::RegisterWorkerResponse* registration) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  context.set_wait_for_ready(true);
  Authorize(context);
  grpc::Status status = stub_->RegisterWorker(&context, request, registration);
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    return MarkPermanent(absl::InvalidArgumentError(
        absl::StrCat("the coordinator refused this worker: ", status.error_message())));
  }
  if (!status.ok()) {
    return absl::Status(FromGrpcStatus(status).code(),
                        absl::StrCat("registering: ", status.error_message(), " (the channel is ",
                                     ChannelStateName(channel_->GetState(false)), ")"));
  }
  return absl::OkStatus();
}

absl::Status WorkerDaemon::RunSession() {
  const v1::RegisterWorkerRequest request = Registration();
  RefreshToken();
  v1::RegisterWorkerResponse registration;
  if (absl::Status registered = Register(request, &registration); !registered.ok()) {
    return registered;
  }
  // Bounded both ways: a coordinator's value past a deadline's range (a release that did
  // not bound its flag) would overflow the heartbeats' clock.
  const absl::Duration interval = absl::Milliseconds(
      std::clamp<int64_t>(registration.heartbeat_interval_ms(), 50, kMaxTimeoutMilliseconds));
  grpc::ClientContext context;
  Authorize(context);
  // The heartbeats' thread starts before the session opens, and waits for it: one that
  // cannot start (a host out of threads) then leaves the held reports held, for the next
  // session. A session without heartbeats would be declared lost.
  absl::Notification session_open;
  MonotonicNotification session_over;
  std::thread heartbeats;
  try {
    heartbeats = std::thread([&] {
      session_open.WaitForNotification();
      if (!session_over.HasBeenNotified()) SendHeartbeatsUntil(session_over, interval, context);
    });
  } catch (const std::system_error& failure) {
    return SystemFailureStatus(failure);
  }
  auto end_heartbeats = [&] {
    session_over.Notify();
    if (!session_open.HasBeenNotified()) session_open.Notify();
    heartbeats.join();
  };

  std::unique_ptr<Stream> stream = stub_->Session(&context);
  session_reads_ = 0;  // the coordinator counts each session's messages from the first
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id(registration.worker_id());
  if (!stream->Write(hello)) {
    end_heartbeats();
    return FromGrpcStatus(stream->Finish());
  }
  ReleaseHeldReports(stream.get(), registration.reattached(), request.has_running());
  if (metrics_) metrics_->OnSessionOpened();
  LogInfo(LogContext(),
          absl::StrCat("registered with ", options_.coordinator_address,
                       registration.reattached()
                           ? absl::StrCat("; it re-attached ", request.running().job_id(),
                                          " attempt ", request.running().attempt(), " (rank ",
                                          request.running().rank(), ")")
                           : ""));
  session_open.Notify();

  v1::CoordinatorMessage message;
  while (stream->Read(&message)) {
    ++session_reads_;
    Dispatch(message);
  }
  end_heartbeats();
  // The attempt goes on without a session: the training step never calls the
  // coordinator. A coordinator that restarted re-attaches it when this worker registers
  // again; one that lived on has failed it (its peers are aborted, which ends it here
  // too) and aborts it when this worker's heartbeat names it.
  return EndSession(*stream);
}

absl::Status WorkerDaemon::EndSession(Stream& stream) {
  {
    absl::MutexLock lock(&stream_mu_);
    stream_ = nullptr;
  }
  return FromGrpcStatus(stream.Finish());
}

void WorkerDaemon::SendHeartbeatsUntil(MonotonicNotification& session_over, absl::Duration interval,
                                       grpc::ClientContext& context) {
  // A stop is looked for every kStopPoll, not only at each heartbeat: with the
  // coordinator's interval at 30 s, the drain after a stop noticed late would outlast the
  // pod's grace period and be killed midway.
  // Timed on the monotonic clock: a wall clock stepped back (NTP) would hold the
  // heartbeats back as long, and a healthy worker would be declared lost.
  // (A relative sleep, not a wait with a timeout: this Abseil's waits end at a wall-clock
  // time.)
  constexpr std::chrono::milliseconds kStopPoll(100);
  using Clock = std::chrono::steady_clock;
  const Clock::duration period = absl::ToChronoNanoseconds(interval);
  Clock::time_point next_heartbeat = Clock::now() + period;
  for (;;) {
    std::this_thread::sleep_for(std::min<Clock::duration>(
        kStopPoll, std::max(Clock::duration::zero(), next_heartbeat - Clock::now())));
    if (session_over.HasBeenNotified()) return;
    if (Stopping()) {
      DrainForShutdown(interval);
      SendHeartbeat();  // saying it stops: the session's end is planned, not a loss
      // A half-close, not a cancel: the attempt's last report, written just now, is
      // delivered before the coordinator sees the session end.
      CloseSessionForWrites();
      if (!session_over.WaitForNotificationWithTimeout(kSessionCloseGrace)) context.TryCancel();
      return;
    }
    if (Clock::now() < next_heartbeat) continue;
    next_heartbeat = Clock::now() + period;
    RestartIfAbortIsStuck();
    SendHeartbeat();
  }
}

std::optional<v1::RunningAttempt> WorkerDaemon::AttemptToReattach() {
  absl::MutexLock lock(&runner_mu_);
  if (!runner_ || attempt_declined_) return std::nullopt;
  v1::RunningAttempt running;
  running.set_job_id(runner_->job_id());
  running.set_attempt(runner_->attempt());
  running.set_rank(runner_->rank());
  running.set_step(runner_->position().step());
  running.set_ended(outbox_.ended());
  running.set_rendezvous_token(runner_->rendezvous_token());
  running.set_peer_lost(runner_->position().phase() == kAwaitingMembershipPhase);
  return running;
}

void WorkerDaemon::ReleaseHeldReports(Stream* stream, bool reattached, bool announced) {
  if (announced && !reattached) {
    absl::MutexLock lock(&runner_mu_);
    if (runner_ && runner_->done()) attempt_declined_ = true;
  }
  // Under the stream's lock, so that a report the attempt sends meanwhile waits and goes
  // after these, on this session.
  absl::MutexLock lock(&stream_mu_);
  outbox_.Resend(reattached, [&](const v1::AttemptReport& report) {
    v1::WorkerMessage message;
    *message.mutable_report() = report;
    CountCoordinatorCall();
    return stream->Write(message);
  });
  stream_ = stream;
}

bool WorkerDaemon::Write(const v1::WorkerMessage& message) {
  CountCoordinatorCall();
  absl::MutexLock lock(&stream_mu_);
  return stream_ != nullptr && stream_->Write(message);
}

bool WorkerDaemon::WriteUnlessTheAttemptEnded(const v1::WorkerMessage& message) {
  CountCoordinatorCall();
  absl::MutexLock lock(&stream_mu_);
  return !outbox_.ended() && stream_ != nullptr && stream_->Write(message);
}

void WorkerDaemon::SendReport(const v1::AttemptReport& report) {
  if (metrics_) metrics_->OnReport(report);
  v1::WorkerMessage message;
  *message.mutable_report() = report;
  CountCoordinatorCall();
  // Written, then kept or held, under the stream's lock, which a new session's
  // ReleaseHeldReports holds while it sends what is held and installs the stream: this
  // report is held before it runs, or written on the new stream after it. Held after it
  // (the write having found no stream), it waited for the next session, and a final
  // report lost so left the job waiting on this rank and the worker BUSY for good.
  absl::MutexLock lock(&stream_mu_);
  if (stream_ != nullptr && stream_->Write(message)) {
    outbox_.Sent(report);
  } else {
    outbox_.Hold(report);
  }
}

void WorkerDaemon::OnDataPlaneProbe(const v1::DataPlaneProbe& probe) {
  absl::MutexLock lock(&probe_mu_);
  // The one before ended within its timeout, or is about to.
  if (probe_thread_.joinable()) probe_thread_.join();
  try {
    probe_thread_ = std::thread([this, probe] { AnswerDataPlaneProbe(probe); });
  } catch (const std::system_error& failure) {
    // Unanswered, the probe times out at the coordinator, which blames no peer for it.
    LogWarning(
        LogContext().Job(probe.job_id()).Attempt(probe.attempt()).Rank(probe.rank()),
        absl::StrCat("not probing the data plane: ", SystemFailureStatus(failure).message()));
  }
}

void WorkerDaemon::AnswerDataPlaneProbe(const v1::DataPlaneProbe& probe) {
  std::vector<ProbeTarget> targets;
  for (const v1::DataPlaneProbe::Target& target : probe.targets()) {
    targets.push_back({target.rank(), target.address()});
  }
  const absl::Duration timeout =
      absl::Milliseconds(std::clamp<int64_t>(probe.timeout_ms(), 100, 10000));
  v1::WorkerMessage message;
  v1::DataPlaneProbeResult* result = message.mutable_probe_result();
  result->set_job_id(probe.job_id());
  result->set_attempt(probe.attempt());
  result->set_rank(probe.rank());
  std::vector<std::string> missed;
  for (const ProbeOutcome& outcome : ProbePeers(targets, timeout)) {
    v1::DataPlaneProbeResult::Outcome* answer = result->add_outcomes();
    answer->set_rank(outcome.rank);
    answer->set_reached(outcome.reached);
    answer->set_error(outcome.error);
    if (!outcome.reached)
      missed.push_back(absl::StrCat("rank ", outcome.rank, " (", outcome.error, ")"));
  }
  LogInfo(
      LogContext().Job(probe.job_id()).Attempt(probe.attempt()).Rank(probe.rank()),
      absl::StrCat("probed the data plane of ", targets.size(), " peers: ",
                   missed.empty() ? "reached every one"
                                  : absl::StrCat("did not reach ", absl::StrJoin(missed, ", "))));
  Send(message);
}

void WorkerDaemon::OnAssignment(const v1::Assignment& assignment) {
  // The coordinator assigns only a worker it believes idle, so an attempt still here has
  // almost always ended and is winding down: one that reported COMPLETED is assigned
  // anew as soon as the report arrives, possibly before its thread has marked itself
  // done; one told to abort may be frozen behind a heartbeat that already said idle.
  // Such an attempt ends within about a second (inside a Gloo collective, within its
  // timeout): wait for it, rather than refuse the new assignment and fail that attempt.
  // runner_ changes only on this thread, so the pointer stays valid without the lock.
  AttemptRunner* ending = nullptr;
  {
    absl::MutexLock lock(&runner_mu_);
    if (runner_ && !runner_->done()) ending = runner_.get();
  }
  if (ending != nullptr) ending->WaitUntilDone(kEndingAttemptGrace);
  absl::MutexLock lock(&runner_mu_);
  if (runner_ && !runner_->done()) {
    RefuseAssignment(assignment,
                     absl::StrCat("worker is still running ", runner_->job_id(), " attempt ",
                                  runner_->attempt()),
                     Refusal::kBusy);
    return;
  }
  // Stopping (SIGTERM) while the coordinator still counted it idle: the attempt is not
  // started only to fail when the session closes, and the coordinator, told the worker
  // leaves, places it elsewhere.
  if (Stopping()) {
    RefuseAssignment(assignment,
                     "the worker is shutting down (it was told to stop: SIGTERM or SIGINT)",
                     Refusal::kLeaving);
    return;
  }
  runner_.reset();  // joins the finished runner
  outbox_.StartAttempt();
  attempt_declined_ = false;
  // Before the runner's thread starts: its first report may end the attempt at once (a
  // refused path), which must find the worker busy to leave it idle.
  if (metrics_) metrics_->OnAttemptStarted();
  try {
    runner_ = std::make_unique<AttemptRunner>(
        channel_, assignment, options_.data_plane, options_.faults, options_.make_device,
        options_.memory, options_.path_ceiling,
        [this](const v1::AttemptReport& report) { SendReport(report); },
        metrics_ ? metrics_->collectives() : nullptr);
  } catch (const std::system_error& failure) {
    if (metrics_) metrics_->OnAttemptEnded();
    RefuseAssignment(assignment, std::string(SystemFailureStatus(failure).message()),
                     Refusal::kFault);
    return;
  }
}

void WorkerDaemon::RefuseAssignment(const v1::Assignment& assignment, const std::string& why,
                                    Refusal cause) {
  v1::WorkerMessage refusal;
  v1::AttemptReport* report = refusal.mutable_report();
  report->set_job_id(assignment.job_id());
  report->set_attempt(assignment.attempt());
  report->set_rank(assignment.rank());
  report->set_phase(v1::ABORTED);
  report->set_message(why);
  report->set_worker_leaving(cause == Refusal::kLeaving);
  report->set_worker_busy(cause == Refusal::kBusy);
  report->set_worker_fault(cause == Refusal::kFault);
  Send(refusal);
}

void WorkerDaemon::OnHookChange(const v1::HookChange& change) {
  v1::WorkerMessage message;
  {
    absl::MutexLock lock(&runner_mu_);
    if (runner_ && runner_->job_id() == change.job_id() && runner_->attempt() == change.attempt()) {
      *message.mutable_hook_ack() = runner_->OnHookChange(change);
    } else {
      // Not running that attempt (any more): it cannot switch.
      v1::HookChangeAck* ack = message.mutable_hook_ack();
      ack->set_job_id(change.job_id());
      ack->set_attempt(change.attempt());
      ack->set_rank(-1);
      ack->set_version(change.version());
      ack->set_accepted(false);
    }
  }
  Send(message);
}

void WorkerDaemon::OnPlanUpdate(const v1::PlanUpdate& update) {
  absl::MutexLock lock(&runner_mu_);
  if (runner_ && runner_->job_id() == update.job_id() && runner_->attempt() == update.attempt()) {
    runner_->OnPlanUpdate(update.plan());
  }
}

void WorkerDaemon::OnLeaveRequest(const v1::LeaveRequest& leave) {
  absl::MutexLock lock(&runner_mu_);
  if (runner_ && runner_->job_id() == leave.job_id() && runner_->attempt() == leave.attempt() &&
      runner_->Leave(leave.reason(), /*worker_stops=*/false)) {
    LogInfo(LogContext().Job(leave.job_id()).Attempt(leave.attempt()),
            absl::StrCat("leaving with its group after the step in flight: ", leave.reason()));
  }
}

void WorkerDaemon::OnMembershipChange(const v1::MembershipChange& change) {
  absl::MutexLock lock(&runner_mu_);
  if (runner_ && runner_->job_id() == change.job_id() && runner_->attempt() == change.attempt()) {
    LogInfo(LogContext().Job(change.job_id()).Attempt(change.attempt()),
            absl::StrCat("membership epoch ", change.epoch(), ": ", change.live_ranks_size(),
                         " ranks train on"));
    runner_->OnMembershipChange(change);
  }
}

void WorkerDaemon::OnHookDecision(const v1::HookDecision& decision) {
  absl::MutexLock lock(&runner_mu_);
  if (runner_ && runner_->job_id() == decision.job_id() &&
      runner_->attempt() == decision.attempt()) {
    runner_->OnHookDecision(decision);
  }
}

void WorkerDaemon::RestartIfAbortIsStuck() {
  if (!options_.restart_process) return;
  absl::Time aborted_at;
  {
    absl::MutexLock lock(&runner_mu_);
    if (!runner_ || runner_->done() || !runner_->aborting()) return;
    aborted_at = runner_->aborted_at();
  }
  if (!AbortIsStuck(aborted_at, Clock::Real().Now(), options_.stuck_abort_grace)) return;
  LogError(LogContext(), absl::StrCat("the aborted attempt has not ended ",
                                      absl::FormatDuration(options_.stuck_abort_grace),
                                      " after the abort (a collective is blocked on a peer); "
                                      "restarting this worker"));
  options_.restart_process();
}

void WorkerDaemon::OnAbort(const v1::Abort& abort) {
  LogWarning(LogContext().Job(abort.job_id()).Attempt(abort.attempt()),
             absl::StrCat("abort: ", abort.reason()));
  absl::MutexLock lock(&runner_mu_);
  if (runner_ && runner_->job_id() == abort.job_id() && runner_->attempt() == abort.attempt()) {
    runner_->Abort(abort.reason());
  }
}

}  // namespace shardwise
