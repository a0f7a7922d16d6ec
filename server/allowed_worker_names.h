#ifndef SHARDWISE_SERVER_ALLOWED_WORKER_NAMES_H_
#define SHARDWISE_SERVER_ALLOWED_WORKER_NAMES_H_

// The worker names a WorkerService caller may register and open sessions under, decided
// from what authenticated it: its verified client certificate (--worker_ca: that
// certificate's common name alone), its worker token (the `worker_names` of the token's
// entry in the tokens file, where it lists some), or nothing that binds a name (no
// authentication; an admin's token; a worker token whose entry lists none, one token
// serving a whole pool). A pure value: WorkerServiceImpl decides it per call, and a
// session keeps it for its hello.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardwise {

class AllowedWorkerNames {
 public:
  static AllowedWorkerNames Any() { return AllowedWorkerNames(Kind::kAny, "", {}); }
  static AllowedWorkerNames Certificate(std::string common_name) {
    return AllowedWorkerNames(Kind::kCertificate, std::move(common_name), {});
  }
  // The `patterns` (common/worker_name.h) of `principal`'s worker token.
  static AllowedWorkerNames TokenEntry(std::string principal, std::vector<std::string> patterns) {
    return AllowedWorkerNames(Kind::kTokenEntry, std::move(principal), std::move(patterns));
  }

  enum class Call { kRegistration, kSession };
  // OK when `name` is allowed; PERMISSION_DENIED saying whose name it may be otherwise.
  absl::Status Check(Call call, absl::string_view name) const;

  // The certificate's common name: the name of a registration that gives none.
  std::optional<std::string> certificate_name() const {
    return kind_ == Kind::kCertificate ? std::optional<std::string>(holder_) : std::nullopt;
  }

 private:
  enum class Kind { kAny, kCertificate, kTokenEntry };
  AllowedWorkerNames(Kind kind, std::string holder, std::vector<std::string> patterns)
      : kind_(kind), holder_(std::move(holder)), patterns_(std::move(patterns)) {}

  Kind kind_;
  std::string holder_;  // the certificate's common name, or the token's principal
  std::vector<std::string> patterns_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_ALLOWED_WORKER_NAMES_H_
