#include "server/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server_builder.h"
#include "server/grpc_metrics.h"

namespace shardwise {

namespace {

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsOptions& tls) {
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  // Watched files: a renewed certificate (or worker CA) serves the next handshake; the
  // connections open keep theirs, so no session drops.
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.worker_ca_file, tls.reload_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!tls.worker_ca_file.empty()) {
    options.watch_root_certs();
    // Clients of JobService authenticate with tokens, not certificates: a certificate is
    // asked for and verified when given; the worker services require one.
    options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

// Takes gRPC's server reflection out of a server: its library adds it to every server
// the process builds as it loads.
class WithoutServerReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

// A state file that could not be opened or read, said with its path (SQLite's own
// messages do not name it), and, where it is damaged, what an operator does about it.
absl::Status StateFileFailure(const std::string& path, const absl::Status& failure) {
  const std::string named = absl::StrContains(failure.message(), path)
                                ? std::string(failure.message())
                                : absl::StrCat("state file '", path, "': ", failure.message());
  return absl::Status(
      failure.code(),
      absl::StrCat(named, absl::IsDataLoss(failure) ? " (damaged: restore it from a backup, or "
                                                      "start with another --state_file)"
                                                    : ""));
}

}  // namespace

absl::Status Coordinator::CheckExposure(const CoordinatorOptions& options) {
  const TlsOptions& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (!tls.worker_ca_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError("--worker_ca needs --tls_cert and --tls_key");
  }
  for (const std::string* file :
       {&tls.cert_file, &tls.key_file, &tls.worker_ca_file, &options.tokens_file}) {
    if (!file->empty() && ::access(file->c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read '", *file, "'"));
    }
  }
  if (IsLoopbackAddress(options.listen_address) || options.insecure) return absl::OkStatus();
  if (tls.cert_file.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to serve ", options.listen_address,
        " without TLS: anyone who reaches it "
        "could read the tokens and specs sent to it and pose as the coordinator. Give "
        "--tls_cert and --tls_key (and --worker_ca for workers), or --insecure on a network "
        "you trust"));
  }
  if (options.tokens_file.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to serve ", options.listen_address,
        " without --tokens_file: anyone who "
        "reaches it could submit and cancel jobs. Give --tokens_file, or --insecure on a "
        "network you trust"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorOptions& options) {
  RETURN_IF_ERROR(CheckExposure(options));
  std::unique_ptr<Coordinator> c(new Coordinator(options));
  if (!options.tokens_file.empty()) {
    ASSIGN_OR_RETURN(c->tokens_,
                     TokenAuthenticator::Load(options.tokens_file, options.controller.clock));
  }
  ASSIGN_OR_RETURN(c->state_lock_, StateFileLock::Acquire(options.state_file));
  auto state = StateStore::Open(options.state_file);
  if (!state.ok()) return StateFileFailure(options.state_file, state.status());
  c->state_ = std::move(*state);
  c->state_->set_commit_histogram(&c->metrics_.state_commit_seconds);
  JobManager::Options jobs;
  jobs.clock = options.controller.clock;
  auto loaded = JobManager::Create(c->state_.get(), jobs);
  if (!loaded.ok()) return StateFileFailure(options.state_file, loaded.status());
  c->jobs_ = std::move(*loaded);
  WorkerRegistry::Options workers = options.workers;
  workers.clock = options.controller.clock;
  c->workers_ = std::make_unique<WorkerRegistry>(workers);
  c->rendezvous_ = std::make_unique<RendezvousStore>(options.rendezvous);
  c->executor_ = std::make_unique<SerialExecutor>();
  JobController::Options controller = options.controller;
  controller.executor = c->executor_.get();
  controller.metrics = &c->metrics_;
  c->controller_ = std::make_unique<JobController>(c->jobs_.get(), c->workers_.get(),
                                                   c->rendezvous_.get(), controller);
  c->watch_hub_ = std::make_unique<WatchHub>(
      c->jobs_.get(), static_cast<size_t>(options.max_watches),
      static_cast<size_t>(options.max_watches_per_principal), options.watch_write_timeout);
  const bool worker_certificates = !options.tls.worker_ca_file.empty();
  c->job_calls_ = std::make_unique<JobCalls>(c->controller_.get(), c->jobs_.get(),
                                             c->workers_.get(), c->tokens_.get());
  c->call_pool_ = std::make_unique<CallPool>(options.client_call_threads,
                                             static_cast<size_t>(options.max_queued_client_calls));
  c->submission_pool_ = std::make_unique<CallPool>(
      options.submission_threads, static_cast<size_t>(options.max_queued_submissions));
  c->job_service_ = std::make_unique<JobServiceImpl>(
      c->job_calls_.get(), c->call_pool_.get(), c->submission_pool_.get(), c->watch_hub_.get());
  c->silent_sessions_ =
      std::make_unique<SilentSessions>(options.session_hello_timeout, options.controller.clock);
  WorkerServiceOptions worker_service;
  worker_service.require_certificate = worker_certificates;
  worker_service.tokens = c->tokens_.get();
  worker_service.silent = c->silent_sessions_.get();
  c->worker_service_ = std::make_unique<WorkerServiceImpl>(c->controller_.get(), c->executor_.get(),
                                                           &c->metrics_, worker_service);
  c->rendezvous_service_ =
      std::make_unique<RendezvousServiceImpl>(c->rendezvous_.get(), worker_certificates);
  grpc::EnableDefaultHealthCheckService(true);
  RETURN_IF_ERROR(c->StartServing());
  if (!options.health_address.empty()) RETURN_IF_ERROR(c->StartHealthServer());
  c->SetServing(true);
  if (!options.metrics_address.empty()) {
    c->AddCollectors();
    ASSIGN_OR_RETURN(c->metrics_server_,
                     MetricsHttpServer::Start(options.metrics_address, &c->metrics_registry_));
  }
  c->periodic_ = std::thread([raw = c.get()] { raw->RunPeriodicWork(); });
  return c;
}

absl::Status Coordinator::StartServing() {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen_address, ServerCredentials(options_.tls), &port_);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(rendezvous_service_.get());
  // Synchronous calls (rendezvous Set/Get/Add) run on a bounded pool; client calls are
  // answered on the CallPool, and workers' sessions, registrations and rendezvous waits
  // are callbacks that hold no thread.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> metrics;
  metrics.push_back(std::make_unique<GrpcMetricsFactory>(&metrics_registry_));
  builder.experimental().SetInterceptorCreators(std::move(metrics));
  grpc::ResourceQuota quota("shardwise-coordinator");
  quota.SetMaxThreads(options_.max_sync_threads);
  builder.SetResourceQuota(quota);
  // A rank's rendezvous key (its Gloo addresses) may pass gRPC's 4 MiB default in a
  // large world (RendezvousStore::Limits::ForWorldsOf).
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(
      std::max<size_t>(4 << 20, options_.rendezvous.max_value_bytes + (64 << 10)), INT32_MAX)));
  // Workers keep their session open for days; let gRPC notice dead peers.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen_address,
                                               " (address in use, or not an address here)"));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::StartHealthServer() {
  grpc::ServerBuilder builder;
  // Probes come from the node: plaintext, and nothing but the serving status (server
  // reflection, which registers itself for every server of the process, is taken out).
  builder.SetOption(std::make_unique<WithoutServerReflection>());
  builder.RegisterCallbackGenericService(&health_port_others_);
  builder.AddListeningPort(options_.health_address, grpc::InsecureServerCredentials(),
                           &health_port_);
  health_server_ = builder.BuildAndStart();
  if (health_server_ == nullptr || health_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve health on ", options_.health_address,
                                               " (address in use, or not an address here)"));
  }
  return absl::OkStatus();
}

// Readiness ("", the overall status) follows whether every change reached the state
// file; liveness (kLivenessService) stays SERVING while the process answers, so that a
// liveness probe does not restart a coordinator whose disk is full and lose the changes it
// holds in memory.
void Coordinator::SetServing(bool serving) {
  for (grpc::Server* server : {server_.get(), health_server_.get()}) {
    if (server == nullptr) continue;
    server->GetHealthCheckService()->SetServingStatus("", serving);
    server->GetHealthCheckService()->SetServingStatus(kLivenessService, true);
  }
}

void Coordinator::AddCollectors() {
  Family<Gauge>& jobs =
      metrics_registry_.AddGauge("shardwise_coordinator_jobs", "Jobs by state.", {"state"});
  Family<Gauge>& workers =
      metrics_registry_.AddGauge("shardwise_coordinator_workers",
                                 "Registered workers by state and device.", {"state", "device"});
  Gauge& queued = metrics_registry_
                      .AddGauge("shardwise_coordinator_executor_queued",
                                "Worker messages waiting for the controller.")
                      .With({});
  Gauge& heartbeat_age = metrics_registry_
                             .AddGauge("shardwise_coordinator_heartbeat_age_max_seconds",
                                       "Age of the oldest last heartbeat of a worker not lost.")
                             .With({});
  // One series per RUNNING job: bounded by the jobs the cluster runs at once, and
  // dropped when a job ends.
  Family<Gauge>& step = metrics_registry_.AddGauge(
      "shardwise_job_step", "Steps a RUNNING job has completed.", {"job_id"});
  Family<Gauge>& total_steps = metrics_registry_.AddGauge(
      "shardwise_job_total_steps", "Steps a RUNNING job will run.", {"job_id"});
  Family<Gauge>& loss = metrics_registry_.AddGauge(
      "shardwise_job_loss", "A RUNNING job's latest loss (its global batch's).", {"job_id"});
  Family<Gauge>& steps_per_second = metrics_registry_.AddGauge(
      "shardwise_job_steps_per_second", "A RUNNING job's speed.", {"job_id"});
  Family<Gauge>& tokens_per_second =
      metrics_registry_.AddGauge("shardwise_job_tokens_per_second",
                                 "A RUNNING GPT job's tokens per second, all ranks.", {"job_id"});
  metrics_registry_.AddCollector(
      [this, &step, &total_steps, &loss, &steps_per_second, &tokens_per_second, &heartbeat_age] {
        for (Family<Gauge>* family :
             {&step, &total_steps, &loss, &steps_per_second, &tokens_per_second}) {
          family->Clear();
        }
        for (const v1::Job& job : jobs_->Live()) {
          if (job.state() != v1::RUNNING) continue;
          const v1::Progress& p = job.progress();
          step.With({job.id()}).Set(static_cast<double>(p.step()));
          total_steps.With({job.id()}).Set(static_cast<double>(p.total_steps()));
          loss.With({job.id()}).Set(p.loss());
          steps_per_second.With({job.id()}).Set(p.steps_per_second());
          tokens_per_second.With({job.id()}).Set(p.tokens_per_second());
        }
        heartbeat_age.Set(absl::ToDoubleSeconds(workers_->OldestHeartbeatAge()));
      });
  if (tokens_ != nullptr) {
    Gauge& stale = metrics_registry_
                       .AddGauge("shardwise_coordinator_tokens_file_stale",
                                 "1 while the tokens file's latest version was refused or it "
                                 "cannot be read (the previous tokens stay in force).")
                       .With({});
    metrics_registry_.AddCollector([this, &stale] { stale.Set(tokens_->Stale() ? 1 : 0); });
  }
  metrics_registry_.AddCollector([this, &jobs, &workers, &queued] {
    for (const auto& [state, count] : jobs_->CountByState()) {
      jobs.With({v1::JobState_Name(state)}).Set(count);
    }
    for (const auto& [key, count] : workers_->CountByStateAndDevice()) {
      workers.With({v1::WorkerState_Name(key.first), v1::DeviceKind_Name(key.second)}).Set(count);
    }
    queued.Set(static_cast<double>(executor_->queued()));
  });
}

void Coordinator::TrimEndedJobs() {
  // `done` jobs that ended more than `after` ago were compacted, or forgotten: logged.
  auto log = [](const char* doing, const char* did, const absl::StatusOr<int>& done,
                absl::Duration after) {
    if (!done.ok()) {
      LogError(LogContext(), absl::StrCat(doing, " old jobs: ", done.status().message()));
    } else if (*done > 0) {
      LogInfo(LogContext(), absl::StrCat(did, " ", *done, " jobs that ended more than ",
                                         absl::FormatDuration(after), " ago"));
    }
  };
  log("compacting", "compacted", jobs_->Compact(options_.job_retention), options_.job_retention);
  if (options_.forget_jobs_after == absl::InfiniteDuration()) return;
  log("forgetting", "forgot", jobs_->Forget(options_.forget_jobs_after),
      options_.forget_jobs_after);
}

void Coordinator::RunPeriodicWork() {
  const absl::Duration period =
      std::max(absl::Milliseconds(50), options_.controller.heartbeat_interval / 2);
  bool serving = true;
  absl::Time last_flush = Clock::Real().Now();
  absl::Time last_compaction = absl::InfinitePast();
  while (!stopping_.WaitForNotificationWithTimeout(period)) {
    controller_->CheckHeartbeats();
    if (const int silent = silent_sessions_->EndOverdue(); silent > 0) {
      LogWarning(LogContext(),
                 absl::StrCat("ended ", silent, " worker sessions that sent no hello within ",
                              absl::FormatDuration(options_.session_hello_timeout)));
    }
    if (Clock::Real().Now() - last_flush >= options_.progress_persist_interval) {
      last_flush = Clock::Real().Now();
      const absl::Status flushed = jobs_->FlushProgress();
      if (!flushed.ok()) {
        LogError(LogContext(), absl::StrCat("writing progress: ", flushed.message()));
      }
    }
    if (Clock::Real().Now() - last_compaction >= absl::Hours(1)) {
      last_compaction = Clock::Real().Now();
      TrimEndedJobs();
    }
    // Changes the state file refused (a full disk): retried here; until every one is
    // written the coordinator reports NOT_SERVING, so probes and operators see it.
    absl::Status error;
    const int unsaved = jobs_->RetryUnsavedChanges(&error);
    if ((unsaved == 0) != serving) {
      serving = unsaved == 0;
      SetServing(serving);
      if (serving) {
        LogInfo(LogContext(), "every change is written to the state file again; SERVING");
      } else {
        LogError(LogContext(), absl::StrCat(unsaved,
                                            " job changes cannot be written to the state "
                                            "file (",
                                            error.message(), "); NOT_SERVING until they are"));
      }
    }
  }
}

void Coordinator::Shutdown() {
  if (shut_down_.exchange(true)) return;
  stopping_.Notify();
  controller_->Stop();  // the sessions close below: not the workers' failure
  v1::CoordinatorMessage going_away;
  going_away.mutable_going_away()->set_reason("the coordinator is stopping (SIGTERM)");
  workers_->CloseAllSessions(going_away);
  // Each with a deadline: a health Watch stream stays open until its client cancels it,
  // and a Shutdown without one would wait for it for good (a second signal only sets
  // the same flag again).
  const auto grace = [] { return std::chrono::system_clock::now() + std::chrono::seconds(2); };
  if (health_server_ != nullptr) health_server_->Shutdown(grace());
  server_->Shutdown(grace());
}

void Coordinator::Wait() { server_->Wait(); }

Coordinator::~Coordinator() { (void)Close(); }

absl::Status Coordinator::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  if (server_ != nullptr) {
    Shutdown();
    server_->Wait();
  }
  if (periodic_.joinable()) periodic_.join();
  metrics_server_.reset();
  call_pool_.reset();  // every client call was answered before the server's Wait returned
  submission_pool_.reset();
  // Every call is done: nothing posts to the executor any more. Its last tasks run
  // before the controller they use goes.
  executor_.reset();
  if (watch_hub_ != nullptr) watch_hub_->Shutdown();
  if (jobs_ == nullptr) return absl::OkStatus();
  return WriteWhatIsLeft();
}

// A change the state file refused so far gets one more try; one that is still refused is
// lost with this process (the next start reads the state file), so each is logged.
absl::Status Coordinator::WriteWhatIsLeft() {
  const int unwritten = jobs_->RetryUnsavedChanges();
  if (unwritten > 0) {
    for (const std::string& line : jobs_->DescribeUnsavedChanges()) {
      LogError(LogContext(), absl::StrCat("shutting down with a change unwritten, lost: ", line));
    }
  }
  const absl::Status flushed = jobs_->FlushProgress();
  if (!flushed.ok()) {
    LogError(LogContext(), absl::StrCat("writing progress: ", flushed.message()));
  }
  if (unwritten == 0) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      unwritten, " job changes the state file '", options_.state_file,
      "' refused are lost with this process (each is logged above); the next start reads "
      "the file as it is"));
}

}  // namespace shardwise
