#include "common/channel_credentials.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace shardwise {
namespace {

absl::Status Readable(const char* flag, const std::string& path) {
  if (::access(path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ChannelSecurity& security) {
  if (security.ca_file.empty()) {
    if (!security.cert_file.empty() || !security.key_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_cert and --tls_key need --tls_ca (the CA the coordinator's certificate "
          "chains to)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (absl::Status ca = Readable("--tls_ca", security.ca_file); !ca.ok()) return ca;
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (security.cert_file.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        security.ca_file, security.reload_seconds);
  } else {
    if (absl::Status cert = Readable("--tls_cert", security.cert_file); !cert.ok()) return cert;
    if (absl::Status key = Readable("--tls_key", security.key_file); !key.ok()) return key;
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        security.key_file, security.cert_file, security.ca_file, security.reload_seconds);
  }
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!security.cert_file.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

absl::StatusOr<std::string> CertificateCommonName(const std::string& cert_file) {
  FILE* file = std::fopen(cert_file.c_str(), "r");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_cert: cannot read '", cert_file, "'"));
  }
  X509* certificate = PEM_read_X509(file, nullptr, nullptr, nullptr);
  std::fclose(file);
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert: '", cert_file, "' holds no PEM certificate"));
  }
  char name[256] = {0};
  const int length = X509_NAME_get_text_by_NID(X509_get_subject_name(certificate), NID_commonName,
                                               name, sizeof(name));
  X509_free(certificate);
  if (length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert: '", cert_file, "' has no common name (CN)"));
  }
  return std::string(name, static_cast<size_t>(length));
}

absl::StatusOr<std::string> ReadBearerToken(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read a token from '", path, "'"));
  }
  RETURN_IF_ERROR(CheckBearerToken(absl::StrCat(flag, " '", path, "'"), token));
  return token;
}

absl::Status CheckBearerToken(absl::string_view source, absl::string_view token) {
  for (const char c : token) {
    if (c < '!' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat(source,
                       ": the token holds a space, a control or a non-ASCII character "
                       "(a token is printable ASCII)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTokenTransport(const ChannelSecurity& security, const std::string& address,
                                 const std::string& token) {
  if (token.empty() || !security.ca_file.empty() || IsLoopbackAddress(address)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to send a token in plaintext to ", address,
      ": anyone on the way could read it. Give the CA of the coordinator's certificate "
      "(--tls_ca, or $SHARDWISE_TLS_CA for clients)"));
}

}  // namespace shardwise
