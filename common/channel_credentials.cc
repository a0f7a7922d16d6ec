#include "common/channel_credentials.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

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

struct X509Free {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
using Certificate = std::unique_ptr<X509, X509Free>;

// The first PEM certificate of `path` (named by `source` in errors).
absl::StatusOr<Certificate> ReadCertificate(const std::string& source, const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": cannot read '", path, "'"));
  }
  Certificate certificate(PEM_read_X509(file, nullptr, nullptr, nullptr));
  std::fclose(file);
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": '", path, "' holds no PEM certificate"));
  }
  return certificate;
}

// A CA file that is readable but no certificate (a folder, a key, a mistyped path to some
// other file) would fail every handshake later, reported as a coordinator not reached.
// Only a regular file is read here: a pipe's contents would be taken from gRPC.
absl::Status CheckCaFile(const std::string& source, const std::string& path) {
  RETURN_IF_ERROR(Readable(source.c_str(), path));
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": cannot read '", path, "'"));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": '", path, "' is a folder, not a CA certificate file (PEM)"));
  }
  if (!S_ISREG(info.st_mode)) return absl::OkStatus();
  return ReadCertificate(source, path).status();
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
  RETURN_IF_ERROR(CheckCaFile(security.ca_source, security.ca_file));
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
  ASSIGN_OR_RETURN(const Certificate certificate, ReadCertificate("--tls_cert", cert_file));
  char name[256] = {0};
  const int length = X509_NAME_get_text_by_NID(X509_get_subject_name(certificate.get()),
                                               NID_commonName, name, sizeof(name));
  if (length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert: '", cert_file, "' has no common name (CN)"));
  }
  return std::string(name, static_cast<size_t>(length));
}

absl::StatusOr<std::string> ReadBearerToken(const std::string& flag, const std::string& path) {
  // Read up to a bound, not to the end: a device (/dev/zero) or a pipe that never ends
  // would grow the string until the process died. A pipe (a shell's <(...)) is read.
  constexpr size_t kMaxTokenFileBytes = 64 << 10;
  std::ifstream in(path, std::ios::binary);
  std::string token(kMaxTokenFileBytes + 1, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  if (token.size() > kMaxTokenFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", path, "' holds more than ",
                                                   kMaxTokenFileBytes,
                                                   " bytes (a token is one line)"));
  }
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
