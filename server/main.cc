// shardwise-coordinator: the control plane. See docs/operations.md for every flag.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/command_line_flags.h"
#include "common/daemon_signals.h"
#include "common/log.h"
#include "common/log_flags.h"
#include "common/port_file.h"
#include "common/status_macros.h"
#include "contracts/job_spec_validation.h"
#include "contracts/timeouts.h"
#include "server/coordinator.h"

ABSL_FLAG(std::string, address, "127.0.0.1:7070",
          "host:port to listen on; 127.0.0.1 keeps the coordinator local, 0.0.0.0 exposes it; "
          "port 0 picks a free port");
ABSL_FLAG(std::string, state_file, "shardwise-state.db", "SQLite file holding every job");
ABSL_FLAG(std::string, tls_cert, "",
          "the coordinator's certificate chain (PEM): serve TLS (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "the private key of --tls_cert");
ABSL_FLAG(std::string, worker_ca, "",
          "with TLS: workers must present a client certificate this CA signed, and work under "
          "its name");
ABSL_FLAG(int32_t, tls_reload_seconds, 60,
          "how often the certificate, key and worker CA files are read again (rotation without "
          "a restart)");
ABSL_FLAG(std::string, tokens_file, "",
          "who may call JobService: token hashes, principals and roles (docs/operations.md, "
          "\"Security\"); empty: anyone, as an admin (allowed on loopback only)");
ABSL_FLAG(bool, insecure, false,
          "serve a non-loopback --address without TLS or tokens, on a network you trust");
ABSL_FLAG(std::string, port_file, "", "if set, the bound port is written here once serving");
ABSL_FLAG(std::string, health_address, "",
          "host:port for a plaintext port serving only grpc.health.v1, for probes that cannot "
          "speak TLS (Kubernetes' gRPC probes); empty: not served");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set (with --metrics_address), the metrics port is written here once serving");
ABSL_FLAG(int64_t, heartbeat_interval_ms, 1000, "how often workers send a heartbeat");
ABSL_FLAG(int64_t, heartbeat_timeout_ms, 10000,
          "a worker silent for longer is lost, and its job's attempt fails");
ABSL_FLAG(int64_t, unread_timeout_ms, 30000,
          "a worker that leaves a message of the coordinator's waiting this long (past what its "
          "connection buffers), its heartbeats notwithstanding, is lost: its reader is stuck");
ABSL_FLAG(int64_t, collective_timeout_ms, 60000, "workers' timeout for rendezvous and collectives");
ABSL_FLAG(int64_t, hook_switch_lead_ms, 2000,
          "a comm hook switch is proposed for the step a job should reach this long after "
          "its latest progress report (and at least 3 steps ahead)");
ABSL_FLAG(int64_t, stall_warning_ms, 60000,
          "ranks waiting this long in a collective for ranks that have not entered it are "
          "reported as a stall in the job's events");
ABSL_FLAG(int64_t, stall_abort_ms, 0,
          "if > 0, a stall this long fails the attempt with the stall as its reason");
ABSL_FLAG(int64_t, reattach_grace_ms, 30000,
          "after a restart, how long the ranks of the jobs that were RUNNING have to "
          "re-attach (their workers train on meanwhile); a job missing a rank then is "
          "re-queued from its newest checkpoint");
ABSL_FLAG(int64_t, quarantine_ms, 600000,
          "a worker whose rank did not reach its attempt's rendezvous within the job's "
          "rendezvous.join_timeout_seconds, that was lost before its rank joined, that could "
          "not run its rank (worker_fault), whose host lacks an input other ranks found "
          "(inputs_missing), or that refused three assignments in a row as busy while its "
          "heartbeats said it was idle, is not scheduled for this long (0: never "
          "quarantined)");
ABSL_FLAG(int64_t, stored_timeline_spans, 32768,
          "the newest spans of an ended attempt the state file keeps (shared by its ranks)");
ABSL_FLAG(int32_t, max_world_size, 1024, "largest world_size a job may ask for");
ABSL_FLAG(int64_t, max_parameters, int64_t{8} << 30, "largest model, in parameters");
ABSL_FLAG(int64_t, max_steps, int64_t{1} << 40, "most steps a job may ask for");
ABSL_FLAG(bool, check_paths, true,
          "refuse jobs whose data or weight files this coordinator cannot read");
ABSL_FLAG(std::vector<std::string>, allowed_input_paths, {},
          "folders jobs may read under (comma-separated; default: this coordinator's "
          "working directory)");
ABSL_FLAG(std::vector<std::string>, allowed_output_paths, {},
          "folders jobs may write under (comma-separated; default: this coordinator's "
          "working directory)");
ABSL_FLAG(std::string, metrics_address, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty: not served");
ABSL_FLAG(int32_t, max_workers, 10000,
          "most workers registered at once; a new name beyond is refused (RESOURCE_EXHAUSTED)");
ABSL_FLAG(int64_t, lost_worker_retention_ms, 3600000,
          "a worker lost (disconnected) for longer is forgotten");
ABSL_FLAG(int64_t, job_retention_hours, 720,
          "jobs that ended longer ago are compacted: their specs, events, attempts and "
          "timelines are deleted from the state file, their summaries kept");
ABSL_FLAG(int64_t, forget_jobs_after_hours, 0,
          "jobs that ended longer ago are forgotten: deleted from the state file and memory, "
          "summaries too (the newest job is kept: new ids follow it); 0: never");
ABSL_FLAG(int32_t, max_sync_threads, 32,
          "threads gRPC may use for rendezvous reads and writes (client calls, worker "
          "sessions, registrations and rendezvous waits need none)");
ABSL_FLAG(int32_t, client_call_threads, 4, "threads that answer client calls (JobService)");
ABSL_FLAG(int32_t, max_queued_client_calls, 10000,
          "client calls that may wait for those threads; beyond, RESOURCE_EXHAUSTED (clients "
          "retry)");
ABSL_FLAG(int32_t, max_watches, 10000,
          "JobService.WatchJob streams served at once; beyond, RESOURCE_EXHAUSTED (clients "
          "retry)");
ABSL_FLAG(int32_t, max_watches_per_principal, 1000,
          "WatchJob streams one principal (a token's) may hold at once, so that none takes "
          "every one; beyond, RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, watch_write_timeout_ms, 60000,
          "a WatchJob stream whose update has waited this long for its client to read it is "
          "cancelled (a client that stopped reading would hold its slot for as long as its "
          "connection lives)");
ABSL_FLAG(int64_t, session_hello_timeout_ms, 30000,
          "a worker session that has sent no hello this long after it started is ended "
          "(DEADLINE_EXCEEDED): until its hello it is not watched, and would hold its call for "
          "as long as its connection lives");
ABSL_FLAG(int32_t, submission_threads, 2,
          "threads that admit submitted jobs, reading the files they name (apart from the "
          "other client calls' threads, which a burst of submissions does not hold up)");
ABSL_FLAG(int32_t, max_queued_submissions, 1000,
          "submissions that may wait for those threads; beyond, RESOURCE_EXHAUSTED (clients "
          "retry)");

namespace shardwise {
namespace {

// A millisecond flag's value as a duration, at least `minimum_ms`.
absl::StatusOr<absl::Duration> MillisecondsAtLeast(absl::string_view name, int64_t value,
                                                   int64_t minimum_ms) {
  RETURN_IF_ERROR(CheckFlagAtLeast(name, value, minimum_ms));
  return absl::Milliseconds(value);
}

// MillisecondsAtLeast, for a period the workers are sent (they make deadlines of it): at
// most kMaxTimeoutMilliseconds too.
absl::StatusOr<absl::Duration> WorkerMilliseconds(absl::string_view name, int64_t value,
                                                  int64_t minimum_ms) {
  if (value > kMaxTimeoutMilliseconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be at most ", kMaxTimeoutMilliseconds, " (30 days), got ", value));
  }
  return MillisecondsAtLeast(name, value, minimum_ms);
}

// The controller's timeouts: how workers are watched, stalls judged and restarts waited.
absl::Status ControllerTimeoutsFromFlags(JobController::Options* controller) {
  ASSIGN_OR_RETURN(
      controller->heartbeat_interval,
      WorkerMilliseconds("heartbeat_interval_ms", absl::GetFlag(FLAGS_heartbeat_interval_ms), 1));
  ASSIGN_OR_RETURN(
      controller->heartbeat_timeout,
      MillisecondsAtLeast("heartbeat_timeout_ms", absl::GetFlag(FLAGS_heartbeat_timeout_ms), 1));
  if (controller->heartbeat_timeout <= controller->heartbeat_interval) {
    return absl::InvalidArgumentError("--heartbeat_timeout_ms must exceed --heartbeat_interval_ms");
  }
  ASSIGN_OR_RETURN(
      controller->unread_timeout,
      MillisecondsAtLeast("unread_timeout_ms", absl::GetFlag(FLAGS_unread_timeout_ms), 1));
  if (controller->unread_timeout <= controller->heartbeat_interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("--unread_timeout_ms must exceed --heartbeat_interval_ms, got ",
                     absl::GetFlag(FLAGS_unread_timeout_ms)));
  }
  ASSIGN_OR_RETURN(
      controller->collective_timeout,
      WorkerMilliseconds("collective_timeout_ms", absl::GetFlag(FLAGS_collective_timeout_ms), 1));
  ASSIGN_OR_RETURN(
      controller->hook_switch_lead,
      MillisecondsAtLeast("hook_switch_lead_ms", absl::GetFlag(FLAGS_hook_switch_lead_ms), 0));
  ASSIGN_OR_RETURN(
      controller->stall_warning,
      MillisecondsAtLeast("stall_warning_ms", absl::GetFlag(FLAGS_stall_warning_ms), 1));
  ASSIGN_OR_RETURN(controller->stall_abort,
                   MillisecondsAtLeast("stall_abort_ms", absl::GetFlag(FLAGS_stall_abort_ms), 0));
  ASSIGN_OR_RETURN(
      controller->reattach_grace,
      MillisecondsAtLeast("reattach_grace_ms", absl::GetFlag(FLAGS_reattach_grace_ms), 0));
  ASSIGN_OR_RETURN(controller->quarantine,
                   MillisecondsAtLeast("quarantine_ms", absl::GetFlag(FLAGS_quarantine_ms), 0));
  return absl::OkStatus();
}

// The controller's settings: timeouts, limits and the path policy.
absl::Status ControllerOptionsFromFlags(JobController::Options* controller) {
  RETURN_IF_ERROR(ControllerTimeoutsFromFlags(controller));
  const int64_t stored_spans = absl::GetFlag(FLAGS_stored_timeline_spans);
  RETURN_IF_ERROR(CheckFlagAtLeast("stored_timeline_spans", stored_spans, 1));
  controller->stored_timeline_spans = static_cast<size_t>(stored_spans);
  controller->limits.max_world_size = absl::GetFlag(FLAGS_max_world_size);
  if (controller->limits.max_world_size < 1 ||
      controller->limits.max_world_size > kWorldSizeCeiling) {
    return absl::InvalidArgumentError(absl::StrCat("--max_world_size must be 1 to ",
                                                   kWorldSizeCeiling, ", got ",
                                                   controller->limits.max_world_size));
  }
  controller->limits.max_parameters = absl::GetFlag(FLAGS_max_parameters);
  RETURN_IF_ERROR(CheckFlagAtLeast("max_parameters", controller->limits.max_parameters, 1));
  controller->limits.max_steps = absl::GetFlag(FLAGS_max_steps);
  RETURN_IF_ERROR(CheckFlagAtLeast("max_steps", controller->limits.max_steps, 1));
  controller->check_paths = absl::GetFlag(FLAGS_check_paths);
  // Without the flags, jobs read and write under the working directory only.
  const std::string cwd = std::filesystem::current_path().string();
  auto roots = [&](const std::vector<std::string>& flag) {
    return flag.empty() ? std::vector<std::string>{cwd} : flag;
  };
  auto policy = PathPolicy::Create(roots(absl::GetFlag(FLAGS_allowed_input_paths)),
                                   roots(absl::GetFlag(FLAGS_allowed_output_paths)), cwd);
  if (!policy.ok()) {
    return absl::Status(policy.status().code(),
                        absl::StrCat("--allowed_input_paths / --allowed_output_paths: ",
                                     policy.status().message()));
  }
  controller->path_policy = *policy;
  return absl::OkStatus();
}

// The rendezvous' limits for jobs of up to `max_world_size` ranks on this host; a warning
// when one such CPU job's addresses would not fit them.
RendezvousStore::Limits RendezvousLimits(int32_t max_world_size) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  const size_t memory = pages > 0 && page_bytes > 0
                            ? static_cast<size_t>(pages) * static_cast<size_t>(page_bytes)
                            : 0;
  RendezvousStore::Limits limits = RendezvousStore::Limits::ForWorldsOf(max_world_size, memory);
  const size_t needed = RendezvousStore::Limits::MeshBytesPerAttempt(max_world_size);
  if (needed > limits.max_bytes_per_scope) {
    LogWarning(
        LogContext(),
        absl::StrCat("--max_world_size ", max_world_size, ": a job of that many ranks needs ",
                     needed >> 20, " MiB of rendezvous keys, more than the ",
                     limits.max_bytes_per_scope >> 20,
                     " MiB an attempt may hold here (half this host's memory): its "
                     "bootstrap would be refused"));
  }
  return limits;
}

absl::Status EndedJobBoundsFromFlags(CoordinatorOptions* options) {
  const int64_t retention = absl::GetFlag(FLAGS_job_retention_hours);
  const int64_t forget = absl::GetFlag(FLAGS_forget_jobs_after_hours);
  if (retention < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--job_retention_hours: ", retention,
                                                   " is negative (0 compacts a job once it ends)"));
  }
  if (forget < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--forget_jobs_after_hours: ", forget, " is negative (0: never)"));
  }
  options->job_retention = absl::Hours(retention);
  options->forget_jobs_after = forget == 0 ? absl::InfiniteDuration() : absl::Hours(forget);
  return absl::OkStatus();
}

// The flags that bound the coordinator's threads, queues and streams: each at least 1
// (gRPC's synchronous pool at least 4).
absl::Status CapacityOptionsFromFlags(CoordinatorOptions* options) {
  const int32_t max_workers = absl::GetFlag(FLAGS_max_workers);
  RETURN_IF_ERROR(CheckFlagAtLeast("max_workers", max_workers, 1));
  options->workers.max_workers = static_cast<size_t>(max_workers);
  options->max_sync_threads = absl::GetFlag(FLAGS_max_sync_threads);
  RETURN_IF_ERROR(CheckFlagAtLeast("max_sync_threads", options->max_sync_threads, 4));
  options->client_call_threads = absl::GetFlag(FLAGS_client_call_threads);
  RETURN_IF_ERROR(CheckFlagAtLeast("client_call_threads", options->client_call_threads, 1));
  options->max_queued_client_calls = absl::GetFlag(FLAGS_max_queued_client_calls);
  RETURN_IF_ERROR(CheckFlagAtLeast("max_queued_client_calls", options->max_queued_client_calls, 1));
  options->submission_threads = absl::GetFlag(FLAGS_submission_threads);
  RETURN_IF_ERROR(CheckFlagAtLeast("submission_threads", options->submission_threads, 1));
  options->max_queued_submissions = absl::GetFlag(FLAGS_max_queued_submissions);
  RETURN_IF_ERROR(CheckFlagAtLeast("max_queued_submissions", options->max_queued_submissions, 1));
  options->max_watches = absl::GetFlag(FLAGS_max_watches);
  RETURN_IF_ERROR(CheckFlagAtLeast("max_watches", options->max_watches, 1));
  options->max_watches_per_principal = absl::GetFlag(FLAGS_max_watches_per_principal);
  RETURN_IF_ERROR(
      CheckFlagAtLeast("max_watches_per_principal", options->max_watches_per_principal, 1));
  return absl::OkStatus();
}

// The coordinator's own timeouts (the controller's are ControllerOptionsFromFlags').
absl::Status TimeoutOptionsFromFlags(CoordinatorOptions* options) {
  const int32_t reload = absl::GetFlag(FLAGS_tls_reload_seconds);
  RETURN_IF_ERROR(CheckFlagAtLeast("tls_reload_seconds", reload, 1));
  options->tls.reload_seconds = static_cast<unsigned>(reload);
  ASSIGN_OR_RETURN(options->workers.lost_retention,
                   MillisecondsAtLeast("lost_worker_retention_ms",
                                       absl::GetFlag(FLAGS_lost_worker_retention_ms), 0));
  ASSIGN_OR_RETURN(options->watch_write_timeout,
                   MillisecondsAtLeast("watch_write_timeout_ms",
                                       absl::GetFlag(FLAGS_watch_write_timeout_ms), 1));
  ASSIGN_OR_RETURN(options->session_hello_timeout,
                   MillisecondsAtLeast("session_hello_timeout_ms",
                                       absl::GetFlag(FLAGS_session_hello_timeout_ms), 1));
  return absl::OkStatus();
}

absl::StatusOr<CoordinatorOptions> OptionsFromFlags() {
  CoordinatorOptions options;
  options.listen_address = absl::GetFlag(FLAGS_address);
  options.state_file = absl::GetFlag(FLAGS_state_file);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.health_address = absl::GetFlag(FLAGS_health_address);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.worker_ca_file = absl::GetFlag(FLAGS_worker_ca);
  options.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  options.insecure = absl::GetFlag(FLAGS_insecure);
  RETURN_IF_ERROR(EndedJobBoundsFromFlags(&options));
  RETURN_IF_ERROR(CapacityOptionsFromFlags(&options));
  RETURN_IF_ERROR(TimeoutOptionsFromFlags(&options));
  RETURN_IF_ERROR(ControllerOptionsFromFlags(&options.controller));
  options.rendezvous = RendezvousLimits(options.controller.limits.max_world_size);
  return options;
}

}  // namespace
}  // namespace shardwise

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The Shardwise coordinator. Usage: shardwise-coordinator [flags]");
  absl::ParseCommandLine(argc, argv);
  const absl::Status logging = shardwise::ConfigureLoggingFromFlags("coordinator");
  if (!logging.ok()) {
    std::fprintf(stderr, "shardwise-coordinator: %s\n", std::string(logging.message()).c_str());
    return 2;
  }
  using shardwise::LogContext;

  auto options = shardwise::OptionsFromFlags();
  if (!options.ok()) {
    shardwise::LogError(LogContext(), options.status().message());
    return 2;
  }
  // Before the start, which may take a while (a large state file): a stop asked for
  // meanwhile is a graceful one once it serves, workers told to go, not a kill.
  shardwise::IgnoreBrokenPipes();
  const std::atomic<bool>& stop = shardwise::StopRequestedOnSignal();
  auto coordinator = shardwise::Coordinator::Start(*options);
  if (!coordinator.ok()) {
    shardwise::LogError(LogContext(), coordinator.status().message());
    return 1;
  }
  const int port = (*coordinator)->port();
  shardwise::LogInfo(
      LogContext(),
      absl::StrCat("serving on port ", port, ", state in ", options->state_file,
                   (*coordinator)->metrics_port() > 0
                       ? absl::StrCat("; metrics on port ", (*coordinator)->metrics_port())
                       : ""));
  // As the worker does: no metrics server, no port to write (0 would read as a port).
  if ((*coordinator)->metrics_port() > 0) {
    shardwise::WritePortFile(absl::GetFlag(FLAGS_metrics_port_file),
                             (*coordinator)->metrics_port());
  }
  shardwise::WritePortFile(absl::GetFlag(FLAGS_port_file), port);

  std::thread waiter([&] { (*coordinator)->Wait(); });
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  shardwise::LogInfo(LogContext(), "shutting down");
  (*coordinator)->Shutdown();
  waiter.join();
  if (const absl::Status closed = (*coordinator)->Close(); !closed.ok()) {
    shardwise::LogError(LogContext(), closed.message());
    return 1;
  }
  return 0;
}
