#include "server/rendezvous_service.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/alarm.h"
#include "server/peer_identity.h"

namespace shardwise {
namespace {

// One Wait: finished by the store's callback, which runs exactly once (every key set,
// the scope closed, the deadline's alarm expired it, or the client cancelled).
class WaitReactor final : public grpc::ServerUnaryReactor {
 public:
  WaitReactor(RendezvousStore* store, const v1::RendezvousWaitRequest& request,
              absl::Duration timeout)
      : wait_(std::make_shared<Wait>(store)) {
    const std::vector<std::string> keys(request.keys().begin(), request.keys().end());
    // The alarm and the cancellation reach the wait through `wait_`, which outlives this
    // reactor: an alarm firing as the wait completes finds it already ended.
    wait_->id = store->WaitAsync(request.scope(), keys, [this, timeout](absl::Status status) {
      if (absl::IsDeadlineExceeded(status)) {
        status = absl::DeadlineExceededError(
            absl::StrCat("after ", absl::FormatDuration(timeout), ", ", status.message()));
      }
      Finish(ToGrpcStatus(status));
    });
    alarm_.Set(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout),
               [wait = wait_](bool fired) {
                 if (fired) wait->store->ExpireWait(wait->id);
               });
  }

  void OnCancel() override { wait_->store->CancelWait(wait_->id); }
  void OnDone() override { delete this; }

 private:
  struct Wait {
    explicit Wait(RendezvousStore* s) : store(s) {}
    RendezvousStore* const store;
    uint64_t id = 0;
  };
  std::shared_ptr<Wait> wait_;
  grpc::Alarm alarm_;  // cancelled when the reactor goes; its callback then does nothing
};

}  // namespace

grpc::Status RendezvousServiceImpl::CheckCaller(const grpc::ServerContextBase& context) const {
  if (!require_certificate_ || CertificateName(context).has_value()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "the rendezvous serves workers only: present a client certificate signed "
                      "by the coordinator's --worker_ca");
}

grpc::Status RendezvousServiceImpl::Set(grpc::ServerContext* context,
                                        const v1::RendezvousSetRequest* request,
                                        v1::RendezvousSetResponse*) {
  if (grpc::Status caller = CheckCaller(*context); !caller.ok()) return caller;
  return ToGrpcStatus(store_->Set(request->scope(), request->key(), request->value()));
}

grpc::Status RendezvousServiceImpl::Get(grpc::ServerContext* context,
                                        const v1::RendezvousGetRequest* request,
                                        v1::RendezvousGetResponse* response) {
  if (grpc::Status caller = CheckCaller(*context); !caller.ok()) return caller;
  auto value = store_->Get(request->scope(), request->key());
  if (!value.ok()) return ToGrpcStatus(value.status());
  response->set_value(std::move(*value));
  return grpc::Status::OK;
}

grpc::Status RendezvousServiceImpl::GetMany(grpc::ServerContext* context,
                                            const v1::RendezvousGetManyRequest* request,
                                            v1::RendezvousGetManyResponse* response) {
  if (grpc::Status caller = CheckCaller(*context); !caller.ok()) return caller;
  auto values = store_->GetMany(request->scope(), request->reads());
  if (!values.ok()) return ToGrpcStatus(values.status());
  for (std::string& value : *values) response->add_values(std::move(value));
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* RendezvousServiceImpl::Wait(grpc::CallbackServerContext* context,
                                                      const v1::RendezvousWaitRequest* request,
                                                      v1::RendezvousWaitResponse*) {
  const absl::Duration timeout = absl::Milliseconds(request->timeout_ms());
  grpc::Status refused = CheckCaller(*context);
  if (refused.ok() && (timeout <= absl::ZeroDuration() || timeout > kMaxWait)) {
    refused = grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("timeout_ms: must be in (0, ", absl::ToInt64Milliseconds(kMaxWait), "], got ",
                     request->timeout_ms()));
  }
  if (!refused.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(refused);
    return reactor;
  }
  return new WaitReactor(store_, *request, timeout);
}

grpc::Status RendezvousServiceImpl::Add(grpc::ServerContext* context,
                                        const v1::RendezvousAddRequest* request,
                                        v1::RendezvousAddResponse* response) {
  if (grpc::Status caller = CheckCaller(*context); !caller.ok()) return caller;
  auto value = store_->Add(request->scope(), request->key(), request->delta());
  if (!value.ok()) return ToGrpcStatus(value.status());
  response->set_value(*value);
  return grpc::Status::OK;
}

}  // namespace shardwise
