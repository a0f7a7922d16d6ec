#include "tests/certificates.h"

#include <array>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace shardwise::testing {
namespace {

std::string Run(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 0) << command << "\n" << output;
  return output;
}

}  // namespace

CertificateAuthority::CertificateAuthority(const std::string& dir, const std::string& name)
    : dir_(dir),
      files_{absl::StrCat(dir, "/", name, ".pem"), absl::StrCat(dir, "/", name, ".key")} {
  Run(
      absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                   "-days 1 -subj /CN=",
                   name, " -keyout ", files_.key, " -out ", files_.cert));
}

CertificateFiles CertificateAuthority::Issue(const std::string& common_name,
                                             const std::string& file_name) {
  const std::string base = absl::StrCat(dir_, "/", file_name);
  CertificateFiles issued{base + ".pem", base + ".key"};
  std::ofstream(base + ".ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                               << "extendedKeyUsage=serverAuth,clientAuth\n";
  Run(
      absl::StrCat("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                   "-subj /CN=",
                   common_name, " -keyout ", issued.key, " -out ", base, ".csr"));
  Run(absl::StrCat("openssl x509 -req -days 1 -in ", base, ".csr -CA ", files_.cert, " -CAkey ",
                   files_.key, " -CAcreateserial -extfile ", base, ".ext -out ", issued.cert));
  return issued;
}

std::string ServedSerial(const std::string& address, const std::string& ca_file) {
  const std::string output =
      Run(absl::StrCat("openssl s_client -connect ", address, " -CAfile ", ca_file,
                       " </dev/null 2>/dev/null | openssl x509 -noout -serial"));
  return std::string(absl::StripAsciiWhitespace(output));
}

}  // namespace shardwise::testing
