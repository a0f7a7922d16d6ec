#include "server/coordinator.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace shardwise {

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(
    const CoordinatorOptions& options) {
  std::unique_ptr<Coordinator> c(new Coordinator(options));
  ASSIGN_OR_RETURN(c->state_lock_, StateFileLock::Acquire(options.state_file));
  ASSIGN_OR_RETURN(c->state_, StateStore::Open(options.state_file));
  ASSIGN_OR_RETURN(c->jobs_, JobManager::Create(c->state_.get(), options.jobs));
  c->rendezvous_ = std::make_unique<RendezvousStore>(options.rendezvous);
  c->controller_ = std::make_unique<JobController>(c->jobs_.get(), &c->workers_,
                                                   c->rendezvous_.get(), options.controller);
  c->job_service_ = std::make_unique<JobServiceImpl>(c->controller_.get(), c->jobs_.get(),
                                                     &c->workers_);
  c->worker_service_ = std::make_unique<WorkerServiceImpl>(c->controller_.get());
  c->rendezvous_service_ = std::make_unique<RendezvousServiceImpl>(c->rendezvous_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(), &c->port_);
  builder.RegisterService(c->job_service_.get());
  builder.RegisterService(c->worker_service_.get());
  builder.RegisterService(c->rendezvous_service_.get());
  // Workers keep their session open for days; let gRPC notice dead peers.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  c->server_ = builder.BuildAndStart();
  if (c->server_ == nullptr || c->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address,
                                                " (address in use, or not an address here)"));
  }
  c->failure_detector_ = std::thread([raw = c.get()] { raw->DetectFailures(); });
  return c;
}

void Coordinator::DetectFailures() {
  const absl::Duration period =
      std::max(absl::Milliseconds(50), options_.controller.heartbeat_interval / 2);
  bool serving = true;
  while (!stopping_.WaitForNotificationWithTimeout(period)) {
    controller_->CheckHeartbeats();
    // Changes the state file refused (a full disk): retried here; until every one is
    // written the coordinator reports NOT_SERVING, so probes and operators see it.
    absl::Status error;
    const int unsaved = jobs_->RetryUnsavedChanges(&error);
    if ((unsaved == 0) != serving) {
      serving = unsaved == 0;
      server_->GetHealthCheckService()->SetServingStatus(serving);
      std::fprintf(stderr, "shardwise-coordinator: %s\n",
                   serving ? "every change is written to the state file again; SERVING"
                           : absl::StrCat(unsaved, " job changes cannot be written to the state "
                                          "file (", error.message(), "); NOT_SERVING until "
                                          "they are")
                                 .c_str());
    }
  }
}

void Coordinator::Shutdown() {
  if (shut_down_.exchange(true)) return;
  stopping_.Notify();
  workers_.CloseAllSessions();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void Coordinator::Wait() { server_->Wait(); }

Coordinator::~Coordinator() {
  if (server_ != nullptr) {
    Shutdown();
    server_->Wait();
  }
  if (failure_detector_.joinable()) failure_detector_.join();
}

}  // namespace shardwise
