#include "server/allowed_worker_names.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/printable_text.h"
#include "common/worker_name.h"

namespace shardwise {

absl::Status AllowedWorkerNames::Check(Call call, absl::string_view name) const {
  switch (kind_) {
    case Kind::kAny:
      return absl::OkStatus();
    case Kind::kCertificate:
      if (name == holder_) return absl::OkStatus();
      if (call == Call::kRegistration) {
        return absl::PermissionDeniedError(absl::StrCat(
            "worker name '", ShownValue(name), "' is not the name in its certificate ('",
            ShownValue(holder_), "'): a worker works under its certificate's name"));
      }
      return absl::PermissionDeniedError(absl::StrCat(
          "a session for worker '", ShownValue(name), "' from a certificate of '",
          ShownValue(holder_), "': a worker opens sessions under its certificate's name only"));
    case Kind::kTokenEntry:
      if (WorkerNameMatchesAny(patterns_, name)) return absl::OkStatus();
      return absl::PermissionDeniedError(
          absl::StrCat(call == Call::kRegistration ? "worker name '" : "a session for worker '",
                       ShownValue(name), "' with the token of ", holder_,
                       ", whose entry in the tokens file gives worker_names ",
                       ShownValue(absl::StrJoin(patterns_, ", ")),
                       ": a worker token registers and opens sessions under those names only"));
  }
  return absl::InternalError("unknown kind of allowed worker names");
}

}  // namespace shardwise
