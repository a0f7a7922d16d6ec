#ifndef SHARDWISE_COMMON_CHANNEL_CREDENTIALS_H_
#define SHARDWISE_COMMON_CHANNEL_CREDENTIALS_H_

// How a worker, the CLI or the client library talks to the coordinator: plaintext, or
// TLS verifying the coordinator against a CA, optionally presenting a client
// certificate (workers, when the coordinator requires one: --worker_ca). The files are
// watched: a renewed certificate is used for the next connection without a restart.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/credentials.h"

namespace shardwise {

struct ChannelSecurity {
  std::string ca_file;           // the CA the coordinator's certificate chains to; empty: plaintext
  std::string cert_file;         // this process's certificate (PEM), for mutual TLS; may be empty
  std::string key_file;          // its private key
  unsigned reload_seconds = 60;  // how often the files are read again
  std::string ca_source = "--tls_ca";  // where ca_file came from, for errors
};

// INVALID_ARGUMENT naming the flag when a file is missing, the CA file holds no PEM
// certificate, or only one of cert/key is set.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ChannelSecurity& security);

// A bearer token from `path` (named by `flag` in errors), its surrounding whitespace
// dropped: INVALID_ARGUMENT when the file cannot be read, holds none, or fails
// CheckBearerToken.
absl::StatusOr<std::string> ReadBearerToken(const std::string& flag, const std::string& path);

// INVALID_ARGUMENT naming `source` (never showing the token) unless `token` is printable
// ASCII without spaces: a line break or a control character in an authorization header
// fails every call as an internal error (or forges a header), far from its cause.
absl::Status CheckBearerToken(absl::string_view source, absl::string_view token);

// Refuses (FAILED_PRECONDITION) to send a token in plaintext (no CA in `security`) to an
// `address` off this machine: anyone on the path, or whoever answers at that address,
// would read it. Loopback is fine (tests, port-forwards).
absl::Status CheckTokenTransport(const ChannelSecurity& security, const std::string& address,
                                 const std::string& token);

// The common name of the first certificate in a PEM file: a worker's name when the
// coordinator requires certificates. INVALID_ARGUMENT if it has none.
absl::StatusOr<std::string> CertificateCommonName(const std::string& cert_file);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_CHANNEL_CREDENTIALS_H_
