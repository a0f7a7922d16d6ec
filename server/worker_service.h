#ifndef SHARDWISE_SERVER_WORKER_SERVICE_H_
#define SHARDWISE_SERVER_WORKER_SERVICE_H_

// gRPC plumbing of the worker-facing service. Each Session stream is served by its
// handler thread (sending what the controller queues) and a reader thread (passing
// heartbeats and reports to the controller).

#include "proto/worker_service.grpc.pb.h"
#include "server/job_controller.h"

namespace shardwise {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  explicit WorkerServiceImpl(JobController* controller) : controller_(controller) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) override;

 private:
  JobController* const controller_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WORKER_SERVICE_H_
