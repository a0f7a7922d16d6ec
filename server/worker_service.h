#ifndef SHARDWISE_SERVER_WORKER_SERVICE_H_
#define SHARDWISE_SERVER_WORKER_SERVICE_H_

// gRPC plumbing of the worker-facing service, on the callback API so that no thread is
// held per worker: sessions are SessionStreams, and a registration is checked on the
// gRPC thread and handled on the executor.

#include "proto/worker_service.grpc.pb.h"
#include "server/coordinator_metrics.h"
#include "server/job_controller.h"
#include "server/serial_executor.h"

namespace shardwise {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // `metrics` may be null. With `require_certificate` (the coordinator's --worker_ca), a
  // worker must present a client certificate, and its name is the certificate's: a
  // registration or session under any other name is refused.
  WorkerServiceImpl(JobController* controller, SerialExecutor* executor,
                    CoordinatorMetrics* metrics, bool require_certificate = false)
      : controller_(controller),
        executor_(executor),
        metrics_(metrics),
        require_certificate_(require_certificate) {}

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* context,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Session(
      grpc::CallbackServerContext* context) override;

 private:
  JobController* const controller_;
  SerialExecutor* const executor_;
  CoordinatorMetrics* const metrics_;
  const bool require_certificate_;
};

// With a required certificate: the name a worker may use (its certificate's), or
// UNAUTHENTICATED without a certificate, PERMISSION_DENIED when `claimed` (if not empty)
// is another name. Without: `claimed` as it is.
absl::StatusOr<std::string> WorkerIdentity(const grpc::ServerContextBase& context,
                                           bool require_certificate, const std::string& claimed);

// INVALID_ARGUMENT naming the field when a registration is malformed.
absl::Status ValidateRegistration(const v1::RegisterWorkerRequest& request);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WORKER_SERVICE_H_
