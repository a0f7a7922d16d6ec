#include "server/rendezvous_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace shardwise {

grpc::Status RendezvousServiceImpl::Set(grpc::ServerContext*,
                                        const v1::RendezvousSetRequest* request,
                                        v1::RendezvousSetResponse*) {
  return ToGrpcStatus(store_->Set(request->scope().job_id(), request->scope().attempt(),
                                  request->key(), request->value()));
}

grpc::Status RendezvousServiceImpl::Get(grpc::ServerContext*,
                                        const v1::RendezvousGetRequest* request,
                                        v1::RendezvousGetResponse* response) {
  auto value = store_->Get(request->scope().job_id(), request->scope().attempt(), request->key());
  if (!value.ok()) return ToGrpcStatus(value.status());
  response->set_value(std::move(*value));
  return grpc::Status::OK;
}

grpc::Status RendezvousServiceImpl::Wait(grpc::ServerContext* context,
                                         const v1::RendezvousWaitRequest* request,
                                         v1::RendezvousWaitResponse*) {
  const absl::Duration timeout = absl::Milliseconds(request->timeout_ms());
  if (timeout <= absl::ZeroDuration() || timeout > kMaxWait) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("timeout_ms: must be in (0, ",
                                     absl::ToInt64Milliseconds(kMaxWait), "], got ",
                                     request->timeout_ms()));
  }
  const std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  const absl::Time deadline = absl::Now() + timeout;
  // Waits in slices so that a client that gives up frees this thread.
  while (true) {
    const absl::Duration slice = std::min(deadline - absl::Now(), absl::Milliseconds(500));
    absl::Status status =
        store_->Wait(request->scope().job_id(), request->scope().attempt(), keys, slice);
    if (!absl::IsDeadlineExceeded(status)) return ToGrpcStatus(status);
    if (absl::Now() >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          absl::StrCat("after ", absl::FormatDuration(timeout), ", ",
                                       status.message()));
    }
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "wait cancelled");
  }
}

grpc::Status RendezvousServiceImpl::Add(grpc::ServerContext*,
                                        const v1::RendezvousAddRequest* request,
                                        v1::RendezvousAddResponse* response) {
  auto value = store_->Add(request->scope().job_id(), request->scope().attempt(), request->key(),
                           request->delta());
  if (!value.ok()) return ToGrpcStatus(value.status());
  response->set_value(*value);
  return grpc::Status::OK;
}

}  // namespace shardwise
