#ifndef SHARDWISE_CONTRACTS_JOB_SPEC_VALIDATION_H_
#define SHARDWISE_CONTRACTS_JOB_SPEC_VALIDATION_H_

// Validation of job specs, shared by the client (to fail early, before any RPC) and the
// coordinator (the authority: nothing a client sends is trusted).

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// The most ranks any coordinator takes: --max_world_size is at most this, so a client can
// refuse a larger job by itself.
inline constexpr int32_t kWorldSizeCeiling = 1 << 20;

// Sizes a coordinator accepts. Operators tune world size, parameters and steps with flags
// (docs/operations.md); the others are fixed bounds on what one job may ask of the
// coordinator, the workers and the client (which describes the model before it submits).
struct JobLimits {
  // How a message names the tunable limits: the coordinator's own, or, for a client
  // checking before it submits, the most any coordinator may be configured with.
  std::string tunable = "this coordinator's limit";
  int32_t max_world_size = 1024;
  int64_t max_layer_width = 1 << 20;
  int32_t max_layers = 1024;
  int64_t max_parameters = int64_t{8} << 30;  // 32 GiB of fp32 master weights
  int64_t max_steps = int64_t{1} << 40;
  int64_t max_global_batch_size = int64_t{1} << 24;
  int64_t max_synthetic_samples = int64_t{1} << 26;
  int32_t max_restarts = 100;
  int64_t max_vocab_size = int64_t{1} << 24;  // model.gpt.vocab_size
  int64_t max_block_size = int64_t{1} << 20;  // model.gpt.block_size
  int32_t max_eval_batches = 10000;           // evaluation.batches
};

// The limits an operator tunes (a coordinator's flags) lifted to the most any coordinator
// takes, the fixed ones as they are: what a client checks before a coordinator applies its
// own, so that a client refuses only what no coordinator takes, and never builds a model
// description larger than a coordinator would (a GPT of 2^31 layers).
JobLimits LimitsLifted();

// The most steps a job may leave its losses on the device between reads
// (loss_read_interval_steps): a bound on that buffer, not a limit operators tune.
inline constexpr int32_t kMaxLossReadInterval = 10000;

// The longest rendezvous.join_timeout_seconds: an hour.
inline constexpr int32_t kMaxJoinTimeoutSeconds = 3600;

// Answers whether a path named by the spec exists and is readable. The coordinator checks
// on its own filesystem: data, weights and outputs live on storage shared with workers.
// Given one, validation also inspects token files (their size and header, never their
// ids: contracts/token_files.h).
using PathChecker = std::function<absl::Status(const std::string& path)>;

// A PathChecker for files and folders: a readable regular file (or folder); FIFOs,
// devices and sockets are refused without being opened.
absl::Status CheckReadableFile(const std::string& path);

// OK, or INVALID_ARGUMENT whose message names the field and the value, e.g.
// "job.fsdp.shard_group_size: 3 does not divide job.world_size 4". Accepts a spec as the
// user wrote it (unset fields meaning defaults). `check_path` may be null to skip file
// checks. With it, the files' contents are checked too: token files' headers, the initial
// weights' header, and init.checkpoint_dir's newest complete checkpoint, if there is one
// yet (its manifest and its shards' headers: another model or wrap policy is
// INVALID_ARGUMENT, a manifest that lists other shard files or units DATA_LOSS). A file
// this host cannot read now is UNAVAILABLE.
absl::Status ValidateJobSpec(const v1::JobSpec& spec, const JobLimits& limits,
                             const PathChecker& check_path);

// Whether `hook` can serve the job `spec` (its strategy, mixed precision and optimizer
// overlap). Shared by submission and by changing the hook of a running job; `field`
// names the hook in the errors, as the caller's message holds it.
absl::Status ValidateCommHook(const v1::CommHook& hook, const v1::JobSpec& spec,
                              const std::string& field = "job.comm_hook");

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_SPEC_VALIDATION_H_
