#ifndef SHARDWISE_TESTS_CERTIFICATES_H_
#define SHARDWISE_TESTS_CERTIFICATES_H_

// Real certificates for tests, made with Debian's openssl command: a CA, and certificates
// it signs (P-256 keys, valid for a day), each usable by a server (for 127.0.0.1 and
// localhost) and a client.

#include <string>

namespace shardwise::testing {

struct CertificateFiles {
  std::string cert;  // PEM
  std::string key;
};

class CertificateAuthority {
 public:
  // Makes the CA's key and self-signed certificate in `dir`, named `name`.
  CertificateAuthority(const std::string& dir, const std::string& name);
  const std::string& ca_file() const { return files_.cert; }
  // A certificate for common name `common_name`, its files prefixed `file_name` in the
  // CA's folder.
  CertificateFiles Issue(const std::string& common_name, const std::string& file_name);

 private:
  const std::string dir_;
  CertificateFiles files_;
};

// The serial number of the certificate the TLS server at `address` presents.
std::string ServedSerial(const std::string& address, const std::string& ca_file);

}  // namespace shardwise::testing

#endif  // SHARDWISE_TESTS_CERTIFICATES_H_
