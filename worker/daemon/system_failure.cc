#include "worker/daemon/system_failure.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace shardwise {
namespace {

constexpr char kWorkerFaultUrl[] = "type.shardwise.dev/worker-fault";

absl::Status MarkWorkerFault(absl::Status status) {
  status.SetPayload(kWorkerFaultUrl, absl::Cord("1"));
  return status;
}

}  // namespace

absl::Status SystemFailureStatus(const std::system_error& failure) {
  const std::error_code code = failure.code();
  if (code == std::errc::resource_unavailable_try_again || code == std::errc::not_enough_memory) {
    return MarkWorkerFault(absl::ResourceExhaustedError(
        absl::StrCat("this worker could not start a thread (", failure.what(),
                     "): the host or its container is out of threads or memory (a pids limit?)")));
  }
  // Not a host's limit (a mutex's error: a bug): not marked, lest a release's bug
  // quarantine worker after worker.
  return absl::InternalError(absl::StrCat("a system call failed on this worker: ", failure.what()));
}

bool IsThisWorkersFault(const absl::Status& status) {
  return status.GetPayload(kWorkerFaultUrl).has_value();
}

}  // namespace shardwise
