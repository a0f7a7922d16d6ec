#ifndef SHARDWISE_SERVER_PEER_IDENTITY_H_
#define SHARDWISE_SERVER_PEER_IDENTITY_H_

// A worker's identity when the coordinator requires client certificates (--worker_ca):
// the name in its verified certificate, not a field it sends. gRPC has checked the
// certificate chains to the worker CA during the TLS handshake.

#include <optional>
#include <string>

#include "grpcpp/server_context.h"

namespace shardwise {

// The common name of the peer's verified client certificate, else its first subject
// alternative name; nullopt when the peer presented none.
inline std::optional<std::string> CertificateName(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::nullopt;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    const std::vector<grpc::string_ref> values = auth->FindPropertyValues(property);
    if (!values.empty()) return std::string(values[0].data(), values[0].size());
  }
  return std::nullopt;
}

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_PEER_IDENTITY_H_
