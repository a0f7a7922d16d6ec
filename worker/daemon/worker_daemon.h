#ifndef SHARDWISE_WORKER_DAEMON_WORKER_DAEMON_H_
#define SHARDWISE_WORKER_DAEMON_WORKER_DAEMON_H_

// The worker daemon's control loop: register with the coordinator, hold one session
// (heartbeats and reports up, assignments and aborts down), run at most one attempt at a
// time, and reconnect with exponential backoff whenever the coordinator goes away.
//
// Lifecycle: Run() blocks until `stop` becomes true. Not copyable.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/monotonic_wait.h"
#include "common/path_policy.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/worker_service.grpc.pb.h"
#include "worker/comm/data_plane.h"
#include "worker/comm/data_plane_probe.h"
#include "worker/daemon/attempt_runner.h"
#include "worker/daemon/report_outbox.h"
#include "worker/daemon/worker_metrics.h"
#include "worker/train/trainer.h"

namespace shardwise {

struct WorkerOptions {
  std::string coordinator_address = "127.0.0.1:7070";
  // How to reach it: plaintext by default, TLS (with this worker's certificate when the
  // coordinator requires one) from --tls_ca, --tls_cert, --tls_key.
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  // Sent as "authorization: Bearer TOKEN" with the registration and the session when not
  // empty: the worker role's token, where the coordinator asks it (--token_file). Read
  // again for each session from `token_file` when that is set, so a rotated Secret is
  // used from the next session on.
  std::string token;
  std::string token_file;
  // Where to record the worker's metrics (worker_metrics.h); not owned; none if null.
  MetricsRegistry* metrics = nullptr;
  std::string name;  // stable across reconnects
  v1::DeviceKind device = v1::CPU;
  v1::GpuInfo gpu;                // CUDA workers: what they advertise
  RankDeviceFactory make_device;  // CUDA workers: their GPU's device and communicators
  // What is left checked against each job's estimated memory per rank before an attempt
  // starts, and the host's headroom against each large host allocation (memory_check.h);
  // empty: not checked (--check_memory=false).
  MemoryProbes memory;
  // The folders this worker lets jobs read and write under, besides what the coordinator
  // allows (--allowed_input_paths, --allowed_output_paths); none: the coordinator's roots.
  std::optional<PathPolicy> path_ceiling;
  DataPlaneOptions data_plane;
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // --fault_injection, for tests of a real cluster; null otherwise.
  std::shared_ptr<TrainingHooks> faults;
  // An attempt told to abort that has not ended this long after (a Gloo collective
  // blocked on a frozen peer cannot be interrupted) makes the worker call
  // `restart_process`, which does not return but when the worker is stopping (then its
  // shutdown, exit_process, ends it): the worker starts afresh and is IDLE again at
  // once, rather than DRAINING until the collective timeout. Empty: never.
  absl::Duration stuck_abort_grace = absl::Seconds(5);
  // On SIGTERM, how long a fault-tolerant attempt's rank has to finish its step and leave
  // with its group before it is stopped as any other (--leave_grace_ms).
  absl::Duration leave_grace = absl::Seconds(20);
  std::function<void()> restart_process;
  // On a stop (SIGTERM), or a refusal, whose aborted attempt is still stuck once the
  // drain is over: ends the process at once with the exit code given (0, or
  // kExitRefused), without joining the attempt's thread, which would hold the exit until
  // the collective's own timeout, past the supervisor's grace. Empty: the thread is
  // joined.
  std::function<void(int exit_code)> exit_process;
};

// The worker's exit code when the coordinator refused it for good (Run's error).
inline constexpr int kExitRefused = 2;

// Whether an attempt aborted at `aborted_at` and still running at `now` is stuck.
inline bool AbortIsStuck(absl::Time aborted_at, absl::Time now, absl::Duration grace) {
  return now - aborted_at > grace;
}

class WorkerDaemon {
 public:
  explicit WorkerDaemon(const WorkerOptions& options);
  ~WorkerDaemon();

  // OK once `stop` is set; the coordinator's refusal when it refused this worker's
  // registration as invalid (its name, device or GPU: what its flags say, which no retry
  // changes).
  absl::Status Run(const std::atomic<bool>& stop);

 private:
  // A new channel (and stub) to the coordinator.
  void Connect();
  using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>;

  // One registration and session; returns why it ended.
  absl::Status RunSession();
  // Registers `request`; the coordinator's refusal of it as invalid is permanent.
  absl::Status Register(const v1::RegisterWorkerRequest& request,
                        v1::RegisterWorkerResponse* registration);
  // The session's heartbeats, every `interval` until it is over; on a stop, the drain
  // and the session's half-close (the session's own thread).
  void SendHeartbeatsUntil(MonotonicNotification& session_over, absl::Duration interval,
                           grpc::ClientContext& context);
  // Whether Run's `stop` is set (false before Run).
  bool Stopping() const { return stop_ != nullptr && *stop_; }
  // Forgets the session's stream and finishes it; why it ended.
  absl::Status EndSession(Stream& stream);
  // What this worker registers as: its name, device, memory, probe address, folders and
  // the attempt it may be re-admitted to.
  v1::RegisterWorkerRequest Registration();
  // Acts on one message of the session.
  void Dispatch(const v1::CoordinatorMessage& message);
  void OnAssignment(const v1::Assignment& assignment);
  // Why this worker does not start an assignment, as its refusal tells the coordinator.
  enum class Refusal {
    kLeaving,  // shutting down: not counted idle again (worker_leaving)
    kBusy,     // still running another attempt: idle once its heartbeats say so
    kFault,    // it could not run the rank (no thread left): quarantined (worker_fault)
  };
  // Answers an assignment this worker does not start with its attempt's ABORTED report.
  void RefuseAssignment(const v1::Assignment& assignment, const std::string& why, Refusal cause);
  void OnAbort(const v1::Abort& abort);
  void OnHookChange(const v1::HookChange& change);
  void OnHookDecision(const v1::HookDecision& decision);
  void OnPlanUpdate(const v1::PlanUpdate& update);
  void OnMembershipChange(const v1::MembershipChange& change);
  void OnLeaveRequest(const v1::LeaveRequest& leave);
  // Probes the peers a DataPlaneProbe names on a thread of its own (connections take up
  // to its timeout) and answers with a DataPlaneProbeResult.
  void OnDataPlaneProbe(const v1::DataPlaneProbe& probe);
  void AnswerDataPlaneProbe(const v1::DataPlaneProbe& probe);
  // Writes on the live session; false without one, or if the write failed.
  bool Write(const v1::WorkerMessage& message);
  // Write, but not once the attempt's final report has been produced.
  bool WriteUnlessTheAttemptEnded(const v1::WorkerMessage& message);
  // Heartbeats and answers: dropped without a session.
  void Send(const v1::WorkerMessage& message) { (void)Write(message); }
  // The attempt's reports: held without a session, for a coordinator that re-attaches
  // the attempt (report_outbox.h).
  void SendReport(const v1::AttemptReport& report);
  // What the registration says this worker runs: the current attempt, unless it ended
  // and a coordinator has since declined it.
  std::optional<v1::RunningAttempt> AttemptToReattach();
  // On a new session, before anything else is sent: the held reports (and the final one
  // again) if the coordinator re-attached the attempt; otherwise they are dropped.
  void ReleaseHeldReports(Stream* stream, bool reattached, bool announced);
  v1::Heartbeat CurrentHeartbeat();
  void SendHeartbeat();
  // On shutdown: a fault-tolerant attempt's rank leaves with its group after its step
  // (LeftWithItsGroup); else, or if it has not left within options.leave_grace, aborts
  // the running attempt and waits (bounded) for its final report. Runs on the heartbeat
  // thread, so it sends the heartbeats every `heartbeat_interval` itself while it waits.
  void DrainForShutdown(absl::Duration heartbeat_interval);
  // Whether the running attempt has ended, or its rank left with its group in time; false
  // at once for an attempt without fault tolerance. Heartbeats go on meanwhile: the step
  // in flight may outlast the coordinator's heartbeat timeout, which would count the
  // leaving worker lost.
  bool LeftWithItsGroup(absl::Duration heartbeat_interval);
  // Adds the worker's token, if it has one, to a call to the coordinator.
  void Authorize(grpc::ClientContext& context) const;
  // Reads options.token_file again (a rotated Secret); keeps the token it has if the file
  // cannot be read, saying so.
  void RefreshToken();
  // Tells the coordinator this worker writes no more; it then ends the session.
  void CloseSessionForWrites();
  // Calls options_.restart_process when an aborted attempt is stuck (the heartbeat thread).
  void RestartIfAbortIsStuck();

  const WorkerOptions options_;
  const std::atomic<bool>* stop_ = nullptr;  // Run's; set before any session
  std::string token_;  // options_.token, or the token_file's latest (the sessions' thread)
  std::unique_ptr<WorkerMetrics> metrics_;  // null without options_.metrics
  ReportOutbox outbox_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;

  // The coordinator said it is going away (GoingAway): the next reconnect waits no
  // backoff.
  std::atomic<bool> coordinator_going_away_{false};
  absl::Mutex stream_mu_;  // one writer at a time on the stream
  Stream* stream_ ABSL_GUARDED_BY(stream_mu_) = nullptr;
  // The coordinator's messages read on the session open now, which every heartbeat
  // carries: one it wrote that they leave uncounted means a stuck reader.
  std::atomic<int64_t> session_reads_{0};

  // Peers connect to it when the coordinator asks them to probe this worker's data plane
  // (data_plane_probe.h); null when it could not listen on the data address.
  std::unique_ptr<DataPlaneProbeListener> probe_listener_;
  absl::Mutex probe_mu_;
  std::thread probe_thread_ ABSL_GUARDED_BY(probe_mu_);

  absl::Mutex runner_mu_;
  std::unique_ptr<AttemptRunner> runner_ ABSL_GUARDED_BY(runner_mu_);
  // A coordinator declined to re-attach the (ended) attempt: not announced again.
  bool attempt_declined_ ABSL_GUARDED_BY(runner_mu_) = false;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_WORKER_DAEMON_H_
