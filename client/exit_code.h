#ifndef SHARDWISE_CLIENT_EXIT_CODE_H_
#define SHARDWISE_CLIENT_EXIT_CODE_H_

#include <string>

#include "absl/status/status.h"

namespace shardwise {

// The `shardwise` command's exit codes: one meaning each, for every command, so a script
// knows what to do next from the code alone.
enum ExitCode : int {
  kExitOk = 0,
  // The command ran and its answer is no: the job ended otherwise than SUCCEEDED, a hook
  // switch was abandoned, a spec does not fit the memory given.
  kExitAnsweredNo = 1,
  // Refused: the caller's to mend before trying again (a usage mistake, an invalid spec,
  // no such job, a token without the right, a request the job cannot take in its state,
  // a file this machine cannot write).
  kExitRefused = 2,
  // The outcome is unknown: the coordinator could not be reached, was busy or late past
  // the retries, or failed of its own; the same command may succeed later.
  kExitUnknown = 3,
  // `sample` and `tokenize`, offline programs of their own: a failure other than a usage
  // mistake or an invalid argument (which are kExitRefused), such as a program not found.
  kExitOfflineFailure = 1,
};

// Whether a failure is a refusal the caller must mend (kExitRefused), rather than an
// outcome left unknown (kExitUnknown).
bool IsRefusal(const absl::Status& failure);

// kExitRefused or kExitUnknown, as `failure` is a refusal or not.
ExitCode ExitCodeOf(const absl::Status& failure);

// The line the command prints for `failure`, its code's name first
// ("shardwise: NOT_FOUND: job job-9 not found\n").
std::string FailureLine(const absl::Status& failure);

}  // namespace shardwise

#endif  // SHARDWISE_CLIENT_EXIT_CODE_H_
