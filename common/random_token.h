#ifndef SHARDWISE_COMMON_RANDOM_TOKEN_H_
#define SHARDWISE_COMMON_RANDOM_TOKEN_H_

// Secrets: rendezvous tokens and client tokens, from the kernel's random source.

#include <sys/random.h>

#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"

namespace shardwise {

// `bytes` random bytes as lower-case hex (2 x `bytes` characters).
inline std::string RandomToken(size_t bytes = 16) {
  std::string raw(bytes, '\0');
  for (size_t filled = 0; filled < bytes;) {
    const ssize_t n = ::getrandom(raw.data() + filled, bytes - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);  // EINTR: try again
  }
  return absl::BytesToHexString(raw);
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_RANDOM_TOKEN_H_
