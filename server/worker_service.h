#ifndef SHARDWISE_SERVER_WORKER_SERVICE_H_
#define SHARDWISE_SERVER_WORKER_SERVICE_H_

// gRPC plumbing of the worker-facing service, on the callback API so that no thread is
// held per worker: sessions are SessionStreams, and a registration is checked on the
// gRPC thread and handled on the executor.

#include <atomic>
#include <cstdint>

#include "proto/worker_service.grpc.pb.h"
#include "server/allowed_worker_names.h"
#include "server/client_auth.h"
#include "server/coordinator_metrics.h"
#include "server/job_controller.h"
#include "server/serial_executor.h"
#include "server/silent_sessions.h"

namespace shardwise {

struct WorkerServiceOptions {
  // The coordinator's --worker_ca: a worker must present a client certificate, and its
  // name is the certificate's; a registration or session under any other name is refused.
  bool require_certificate = false;
  // Without certificates, where given (the coordinator's --tokens_file): a worker must
  // present a token of the worker role.
  TokenAuthenticator* tokens = nullptr;
  // Where given, ends sessions that send no hello.
  SilentSessions* silent = nullptr;
  // Registrations waiting for the executor; beyond, RESOURCE_EXHAUSTED (workers retry):
  // a flood of them would otherwise queue without bound ahead of every report.
  int64_t max_queued_registrations = 1024;
};

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // `metrics` may be null.
  WorkerServiceImpl(JobController* controller, SerialExecutor* executor,
                    CoordinatorMetrics* metrics, const WorkerServiceOptions& options = {})
      : controller_(controller), executor_(executor), metrics_(metrics), options_(options) {}

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* context,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Session(
      grpc::CallbackServerContext* context) override;

 private:
  // Whether a registration may join the executor's queue; counts it if so.
  bool AdmitRegistration();

  JobController* const controller_;
  SerialExecutor* const executor_;
  CoordinatorMetrics* const metrics_;
  const WorkerServiceOptions options_;
  std::atomic<int64_t> queued_registrations_{0};
};

// The names a WorkerService caller may work under (server/allowed_worker_names.h). With a
// required certificate: its certificate's common name; UNAUTHENTICATED without one.
// Without one but with `tokens`: the worker_names of its token's entry, or any name where
// the entry lists none, if the token is of the worker (or admin) role; UNAUTHENTICATED
// without a token, PERMISSION_DENIED for another role. Without either: any name.
absl::StatusOr<AllowedWorkerNames> WorkerIdentity(const grpc::ServerContextBase& context,
                                                  bool require_certificate,
                                                  TokenAuthenticator* tokens);

// INVALID_ARGUMENT naming the field when a registration is malformed.
absl::Status ValidateRegistration(const v1::RegisterWorkerRequest& request);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WORKER_SERVICE_H_
