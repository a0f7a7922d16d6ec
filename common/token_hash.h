#ifndef SHARDWISE_COMMON_TOKEN_HASH_H_
#define SHARDWISE_COMMON_TOKEN_HASH_H_

// What a coordinator's tokens file holds of a client token: its SHA-256, in hex. The CLI
// computes it when it makes a token; the coordinator when a client presents one.

#include <openssl/evp.h>

#include <string>

#include "absl/strings/escaping.h"

namespace shardwise {

inline std::string TokenHash(const std::string& token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(token.data(), token.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_TOKEN_HASH_H_
