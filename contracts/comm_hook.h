#ifndef SHARDWISE_CONTRACTS_COMM_HOOK_H_
#define SHARDWISE_CONTRACTS_COMM_HOOK_H_

// Communication hooks as users name them (`shardwise set-hook JOB bf16_compress`), and
// which hook a job uses now. Shared by the client (parsing, describe) and the coordinator.

#include <string>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// "BF16_COMPRESS", "ALLREDUCE in FP16_WRAPPER", "NO_HOOK".
std::string CommHookName(const v1::CommHook& hook);

// A hook from its name, case-insensitive ("bf16_compress"; "none" for NO_HOOK), with an
// optional wrapper name ("fp16_wrapper", "bf16_wrapper"; "" for none). INVALID_ARGUMENT
// names where the unknown value came from (`hook_source`, `wrapper_source`: the CLI's
// argument and flag) and the value, and lists the known ones.
absl::StatusOr<v1::CommHook> ParseCommHook(const std::string& hook, const std::string& wrapper,
                                           const std::string& hook_source = "comm_hook.hook",
                                           const std::string& wrapper_source = "comm_hook.wrapper");

// The hook in effect after the job's applied switches: the newest APPLIED switch's, else
// the spec's.
v1::CommHook HookInEffect(const v1::Job& job);

bool SameHook(const v1::CommHook& a, const v1::CommHook& b);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_COMM_HOOK_H_
