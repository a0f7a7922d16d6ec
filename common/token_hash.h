#ifndef SHARDWISE_COMMON_TOKEN_HASH_H_
#define SHARDWISE_COMMON_TOKEN_HASH_H_

// What a coordinator's tokens file holds of a client token: its SHA-256, in hex (the CLI
// computes it when it makes a token; the coordinator when a client presents one), and the
// name of the principal it stands for.

#include <openssl/evp.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "common/printable_text.h"

namespace shardwise {

// A principal's name, as a tokens file holds it and `shardwise token create` writes it:
// `get jobs`, `describe` and the logs show it, so it is printable text (no control
// character to move a terminal's cursor or forge a line) of at most this many characters.
inline constexpr int64_t kMaxPrincipalCharacters = 128;
inline absl::Status CheckPrincipalName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("principal: must not be empty");
  return CheckPrintableField("principal", name, kMaxPrincipalCharacters);
}

// SHA-256 of `bytes`, in hex.
inline std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

inline std::string TokenHash(const std::string& token) { return Sha256Hex(token); }

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_TOKEN_HASH_H_
