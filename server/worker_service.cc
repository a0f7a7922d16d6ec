#include "server/worker_service.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace shardwise {

grpc::Status WorkerServiceImpl::RegisterWorker(grpc::ServerContext*,
                                               const v1::RegisterWorkerRequest* request,
                                               v1::RegisterWorkerResponse* response) {
  if (!v1::DeviceKind_IsValid(request->device())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("device: unknown value ", request->device()));
  }
  if (request->device() == v1::CUDA && !request->has_gpu()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "gpu: required when device is CUDA (the worker's GPU: name, memory, "
                        "compute capability, driver and NCCL versions)");
  }
  if (request->device() != v1::CUDA && request->has_gpu()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("gpu: set, but device is ",
                                     v1::DeviceKind_Name(request->device())));
  }
  if (request->name().size() > 256) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("name: ", request->name().size(),
                                     " characters; at most 256 are allowed"));
  }
  *response = controller_->RegisterWorker(*request);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Session(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) {
  v1::WorkerMessage first;
  if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no hello");
  if (!first.has_hello() || first.hello().worker_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first session message must be a hello with a worker_id");
  }
  const std::string worker_id = first.hello().worker_id();
  auto outbox = controller_->OpenSession(worker_id);
  if (!outbox.ok()) return ToGrpcStatus(outbox.status());

  std::thread reader([&] {
    v1::WorkerMessage message;
    while (stream->Read(&message)) {
      if (message.has_heartbeat()) {
        controller_->OnHeartbeat(worker_id, message.heartbeat());
      } else if (message.has_report()) {
        controller_->OnReport(worker_id, message.report());
      } else if (message.has_hook_ack()) {
        controller_->OnHookAck(worker_id, message.hook_ack());
      }
    }
    (*outbox)->Close();
  });
  while (!context->IsCancelled()) {
    std::optional<v1::CoordinatorMessage> message = (*outbox)->Pop(absl::Milliseconds(200));
    if (message.has_value()) {
      if (!stream->Write(*message)) break;
    } else if ((*outbox)->closed()) {
      break;
    }
  }
  // Unblocks the reader if the stream is still open (the controller closed the session).
  context->TryCancel();
  reader.join();
  controller_->CloseSession(worker_id, *outbox);
  return grpc::Status::OK;
}

}  // namespace shardwise
