#ifndef SHARDWISE_WORKER_COMM_GRPC_RENDEZVOUS_STORE_H_
#define SHARDWISE_WORKER_COMM_GRPC_RENDEZVOUS_STORE_H_

// Gloo's rendezvous::Store over the coordinator's RendezvousService, scoped to one
// attempt of one job. Gloo's store interface reports errors by throwing; this class
// throws gloo::IoException, and callers convert at the Gloo boundary (data_plane.cc).
//
// A coordinator that is overloaded (RESOURCE_EXHAUSTED) is asked again, and one that is
// unreachable (UNAVAILABLE) too for reads and writes (not for counters, which would
// count twice), with jittered backoff within the store's timeout: a burst of ranks
// connecting at once waits its turn instead of failing the attempt.
//
// Thread-safety: safe for concurrent use (gRPC stubs are).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"
#include "grpcpp/channel.h"
#include "proto/rendezvous_service.grpc.pb.h"
#include "worker/comm/multi_get_store.h"

namespace shardwise {

class GrpcRendezvousStore : public MultiGetStore {
 public:
  // `scope` names the attempt and carries this rank's token (from its Assignment).
  // `abort` (not owned, may be null) stops a wait early when set.
  GrpcRendezvousStore(const std::shared_ptr<grpc::Channel>& channel, v1::RendezvousScope scope,
                      std::chrono::milliseconds timeout, const std::atomic<bool>* abort);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key first, as Gloo expects of get().
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  // GetMany calls of kReadsPerCall reads each (no wait: the caller waited).
  std::vector<std::vector<char>> multiGet(const std::vector<StoreRead>& reads) override;

  // Reads a GetMany call asks for: a full mesh's addresses of 1024 peers take 139 KB,
  // well inside a reply's bound.
  static constexpr size_t kReadsPerCall = 1024;

  // A counter, for callers beyond Gloo (barriers over the store, NCCL id exchange).
  int64_t add(const std::string& key, int64_t delta);

 private:
  const v1::RendezvousScope& Scope() const { return scope_; }
  // One GetMany call: reads [first, end).
  std::vector<std::vector<char>> GetMany(const std::vector<StoreRead>& reads, size_t first,
                                         size_t end);
  // Runs `call` (one RPC, on the context it is given) and sends it again, with jittered
  // backoff, while the coordinator answers that it is overloaded (RESOURCE_EXHAUSTED) or,
  // for an `idempotent` call, unreachable (UNAVAILABLE); up to the store's timeout, or
  // until the attempt is aborted. The last status.
  grpc::Status Retrying(bool idempotent,
                        const std::function<grpc::Status(grpc::ClientContext*)>& call) const;

  std::unique_ptr<v1::RendezvousService::Stub> stub_;
  const v1::RendezvousScope scope_;
  const std::chrono::milliseconds timeout_;
  const std::atomic<bool>* const abort_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_GRPC_RENDEZVOUS_STORE_H_
