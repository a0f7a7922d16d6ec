#include "server/worker_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "server/session_stream.h"

namespace shardwise {

absl::Status ValidateRegistration(const v1::RegisterWorkerRequest& request) {
  if (!v1::DeviceKind_IsValid(request.device())) {
    return absl::InvalidArgumentError(absl::StrCat("device: unknown value ", request.device()));
  }
  if (request.device() == v1::CUDA && !request.has_gpu()) {
    return absl::InvalidArgumentError(
        "gpu: required when device is CUDA (the worker's GPU: name, memory, compute "
        "capability, driver and NCCL versions)");
  }
  if (request.device() != v1::CUDA && request.has_gpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu: set, but device is ", v1::DeviceKind_Name(request.device())));
  }
  if (request.name().size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name: ", request.name().size(), " characters; at most 256 are allowed"));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RegisterWorker(
    grpc::CallbackServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Status valid = ValidateRegistration(*request);
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  const absl::Time arrived = absl::Now();
  // The request and response live until Finish; the controller may commit, so it runs on
  // the executor rather than on this gRPC thread.
  executor_->Post([this, reactor, request, response, arrived] {
    auto registered = controller_->RegisterWorker(*request);
    if (registered.ok()) *response = std::move(*registered);
    if (metrics_ != nullptr) {
      metrics_->worker_message_seconds.With({"register"}).ObserveDuration(absl::Now() - arrived);
    }
    reactor->Finish(registered.ok() ? grpc::Status::OK : ToGrpcStatus(registered.status()));
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Session(
    grpc::CallbackServerContext*) {
  return SessionStream::Start(controller_, executor_, metrics_);
}

}  // namespace shardwise
