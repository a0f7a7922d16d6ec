#ifndef SHARDWISE_SERVER_RENDEZVOUS_SERVICE_H_
#define SHARDWISE_SERVER_RENDEZVOUS_SERVICE_H_

// gRPC plumbing of the rendezvous service over a RendezvousStore. Wait is on gRPC's
// callback API and holds no thread while it waits (a bootstrap of N ranks has N waits
// open at once); Set, Get, GetMany and Add answer at once.

#include "proto/rendezvous_service.grpc.pb.h"
#include "server/rendezvous_store.h"

namespace shardwise {

class RendezvousServiceImpl final
    : public v1::RendezvousService::WithCallbackMethod_Wait<v1::RendezvousService::Service> {
 public:
  // With `require_certificate` (the coordinator's --worker_ca), only callers with a
  // worker certificate are served; every call also needs a rank's token (the store).
  explicit RendezvousServiceImpl(RendezvousStore* store, bool require_certificate = false)
      : store_(store), require_certificate_(require_certificate) {}

  grpc::Status Set(grpc::ServerContext* context, const v1::RendezvousSetRequest* request,
                   v1::RendezvousSetResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::RendezvousGetRequest* request,
                   v1::RendezvousGetResponse* response) override;
  grpc::Status GetMany(grpc::ServerContext* context, const v1::RendezvousGetManyRequest* request,
                       v1::RendezvousGetManyResponse* response) override;
  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const v1::RendezvousWaitRequest* request,
                                 v1::RendezvousWaitResponse* response) override;
  grpc::Status Add(grpc::ServerContext* context, const v1::RendezvousAddRequest* request,
                   v1::RendezvousAddResponse* response) override;

  // The longest a single Wait may block; longer requests are refused.
  static constexpr absl::Duration kMaxWait = absl::Minutes(30);

 private:
  // UNAUTHENTICATED when a certificate is required and the caller has none.
  grpc::Status CheckCaller(const grpc::ServerContextBase& context) const;

  RendezvousStore* const store_;
  const bool require_certificate_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_RENDEZVOUS_SERVICE_H_
