// shardwise: the command line. kubectl-like verbs over the client library.
//
//   shardwise submit JOB.yaml       submit a job spec, print its id
//   shardwise get jobs | workers    list jobs or workers
//   shardwise describe JOB          spec, state, ranks, progress, events
//   shardwise watch JOB             progress bar until the job ends (exit 0 iff SUCCEEDED,
//                                   3 if its end is unknown)
//   shardwise cancel JOB            cancel a pending or running job
//   shardwise set-hook JOB HOOK     change a running job's communication hook
//   shardwise scale JOB --replicas=N  the replica groups a fault-tolerant job trains with
//   shardwise timeline JOB -o F     every rank's spans as one Chrome trace / Perfetto file
//   shardwise tokenize TEXT -o DIR  train/val token files and their tokenizer (runs
//                                   //tokenizer's shardwise-tokenize in this one's place)
//   shardwise sample MODEL          text from a trained GPT or Llama, on this CPU (runs
//                                   worker/tools' shardwise-sample in this one's place)
//   shardwise estimate JOB.yaml     one rank's memory, and with --fit what fits a device

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/exit_code.h"
#include "client/format.h"
#include "client/switch_outcome.h"
#include "client/trace.h"
#include "common/bazel_run.h"
#include "common/clock.h"
#include "common/command_line_flags.h"
#include "common/companion_program.h"
#include "common/coordinator_address.h"
#include "common/path_policy.h"
#include "common/printable_text.h"
#include "common/random_token.h"
#include "common/status_macros.h"
#include "common/token_hash.h"
#include "common/worker_name.h"
#include "contracts/comm_hook.h"
#include "contracts/job_ranks.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/job_spec_io.h"
#include "contracts/job_spec_validation.h"
#include "contracts/job_state.h"
#include "contracts/memory_estimate.h"
#include "contracts/memory_fit.h"
#include "contracts/transformer_config.h"

ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port (default: $SHARDWISE_COORDINATOR, else 127.0.0.1:7070)");
ABSL_FLAG(std::string, tls_ca, "",
          "the CA the coordinator's certificate chains to: talk TLS (default: $SHARDWISE_TLS_CA; "
          "none: plaintext)");
ABSL_FLAG(std::string, token_file, "",
          "a file holding this client's token (default: the token in $SHARDWISE_TOKEN)");
ABSL_FLAG(std::string, principal, "", "with token create: who the token is for");
ABSL_FLAG(std::string, role, "submitter",
          "with token create: viewer, submitter, admin or worker (for worker daemons)");
ABSL_FLAG(std::vector<std::string>, input_paths, {},
          "with token create: the only folders (comma-separated, absolute) the principal's jobs "
          "may read under, inside the coordinator's --allowed_input_paths; none: nowhere");
ABSL_FLAG(std::vector<std::string>, output_paths, {},
          "with token create: the only folders the principal's jobs may write under, inside "
          "the coordinator's --allowed_output_paths; none: nowhere (a principal that only "
          "reads)");
ABSL_FLAG(std::vector<std::string>, worker_names, {},
          "with token create --role=worker: the only worker names (comma-separated; a name, or "
          "a prefix ending in '*', quoted for the shell) the token may register; none given: "
          "any (one token for a whole pool)");
ABSL_FLAG(bool, watch, false, "with submit: watch the job to its end");
ABSL_FLAG(std::string, request_id, "",
          "with submit: the submission's id (default: a new one, printed with the command that "
          "submits again when the submission's outcome is unknown); submitting again with it "
          "makes the job at most once");
ABSL_FLAG(std::string, output, "", "with timeline: the file to write (default JOB-trace.json)");
ABSL_FLAG(std::string, o, "", "short for --output");
ABSL_FLAG(std::string, wrapper, "",
          "with set-hook: fp16_wrapper or bf16_wrapper around the hook (NO_SHARD only)");
// `scale` without --replicas is a usage error; any value given goes to the coordinator.
ABSL_FLAG(std::optional<int32_t>, replicas, std::nullopt,
          "with scale: the replica groups the job is to train with");
ABSL_FLAG(std::vector<std::string>, state, {},
          "with get: only jobs or workers in these states (comma-separated, e.g. RUNNING,PENDING)");
ABSL_FLAG(std::string, submitter, "", "with get jobs: only jobs this principal submitted");
ABSL_FLAG(std::string, device, "", "with get workers: only workers of this device (cpu, cuda)");
ABSL_FLAG(int64_t, limit, 0, "with get: list at most this many (0: all)");
ABSL_FLAG(std::string, fit, "",
          "with estimate: a device's memory (80GiB, 141Gi, ...): the largest micro-batch and "
          "context whose estimate fits it");

namespace shardwise {
namespace {

constexpr char kUsage[] = R"(shardwise: submit and follow Shardwise training jobs.

Usage:
  shardwise submit JOB.yaml [--watch] [--request_id=R]
                                        submit a job spec (YAML or JSON); prints the job id
                                        (exit 3: unknown whether it was made: submit again
                                        with the --request_id it printed)
  shardwise get jobs [--state=S,...] [--submitter=P] [--limit=N]
                                        list jobs, oldest first
  shardwise get workers [--state=S,...] [--device=D] [--limit=N]
                                        list worker daemons
  shardwise describe JOB                a job's spec, state, ranks, progress and events
  shardwise watch JOB                   follow a job to its end (exit 0 only if SUCCEEDED,
                                        1 if it ended otherwise; 3 also when the coordinator
                                        was lost for 10 minutes watching)
  shardwise cancel JOB                  cancel a pending or running job
  shardwise set-hook JOB HOOK [--wrapper=W]
                                        change a running job's communication hook (none,
                                        allreduce, fp16_compress, bf16_compress,
                                        mixed_precision) at a step every rank agrees on;
                                        waits until it is applied (exit 0) or abandoned
                                        (1)
  shardwise scale JOB --replicas=N      the replica groups a running fault-tolerant job
                                        trains with: groups above N leave after their
                                        step; groups join on idle workers below it, up
                                        to fault_tolerance.max_replicas
  shardwise timeline JOB [-o trace.json]
                                        every rank's spans (steps, forward/backward per
                                        unit, collectives, optimizer) as one Chrome trace,
                                        one process per rank; open it in ui.perfetto.dev
  shardwise tokenize TEXT... -o DIR
                   [--tokenizer=bytes|sentencepiece|gpt2|tiktoken|huggingface]
                                        token files for data.tokens and the tokenizer
                                        beside them (`shardwise tokenize --help`)
  shardwise token create --principal=P [--role=submitter]
                         [--input_paths=DIR,..|none] [--output_paths=DIR,..|none]
                         [--worker_names=NAME,PREFIX*,..]
                                        a new token (a client's, or with --role=worker
                                        the worker daemons'), and the entry for the
                                        coordinator's --tokens_file (which holds its hash)
  shardwise sample MODEL.safetensors [--prompt=TEXT] [--tokens=200]
                   [--temperature=0.8] [--top_k=0] [--seed=0]
                                        continue a prompt with a GPT or a Llama a job
                                        wrote (output.final_model_path), on this CPU
  shardwise estimate JOB.yaml [--fit=80GiB]
                                        one rank's memory as the coordinator estimates
                                        it, offline; with --fit, the largest micro-batch
                                        and context (block_size) that fit that memory

Exit codes (sample and tokenize: 0 done, 2 a usage mistake or an invalid argument, 1 any
other failure; every other command:)
  0 done; 1 the answer is no (a job that ended otherwise than SUCCEEDED, a hook switch
  abandoned, a spec that does not fit); 2 refused, the caller's to mend (a usage mistake,
  an invalid spec, no such job, a token without the right, a request the job's state
  refuses); 3 the outcome is unknown (the coordinator unreachable, busy or late past the
  retries, or failing of its own): the same command may succeed later. A failure's line
  names its gRPC status code first (`shardwise: NOT_FOUND: ...`).

The connection's flags (every command but token create, estimate, sample and tokenize):
  --coordinator=HOST:PORT   default $SHARDWISE_COORDINATOR, else 127.0.0.1:7070
  --tls_ca=FILE             TLS, verifying the coordinator (default $SHARDWISE_TLS_CA)
  --token_file=FILE         this client's token (default: $SHARDWISE_TOKEN)
)";

// The enum values named in --state, as `parse` reads them (upper case).
template <typename Enum>
absl::StatusOr<std::vector<Enum>> StatesFromFlag(bool (*parse)(const std::string&, Enum*),
                                                 const char* expected) {
  std::vector<Enum> states;
  for (const std::string& name : absl::GetFlag(FLAGS_state)) {
    Enum state{};
    // The UNSPECIFIED value (0) names no state a job or worker is in.
    if (!parse(absl::AsciiStrToUpper(name), &state) || static_cast<int>(state) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--state: unknown state '", name, "' (expected ", expected, ")"));
    }
    states.push_back(state);
  }
  return states;
}

absl::StatusOr<size_t> LimitFromFlag() {
  const int64_t limit = absl::GetFlag(FLAGS_limit);
  if (limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--limit: ", limit, " is negative (0: all)"));
  }
  return static_cast<size_t>(limit);
}

absl::StatusOr<Client::JobFilter> JobFilterFromFlags() {
  Client::JobFilter filter;
  auto states = StatesFromFlag<v1::JobState>(
      v1::JobState_Parse, "PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED or CANCELLED");
  if (!states.ok()) return states.status();
  filter.states = *states;
  filter.submitter = absl::GetFlag(FLAGS_submitter);
  ASSIGN_OR_RETURN(filter.limit, LimitFromFlag());
  return filter;
}

absl::StatusOr<Client::WorkerFilter> WorkerFilterFromFlags() {
  Client::WorkerFilter filter;
  auto states =
      StatesFromFlag<v1::WorkerState>(v1::WorkerState_Parse, "IDLE, BUSY, DRAINING or LOST");
  if (!states.ok()) return states.status();
  filter.states = *states;
  const std::string device = absl::GetFlag(FLAGS_device);
  if (!device.empty() && (!v1::DeviceKind_Parse(absl::AsciiStrToUpper(device), &filter.device) ||
                          filter.device == v1::DEVICE_KIND_UNSPECIFIED)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: unknown device '", ShownValue(device), "' (expected cpu or cuda)"));
  }
  ASSIGN_OR_RETURN(filter.limit, LimitFromFlag());
  return filter;
}

// A command that failed: its line, and kExitRefused or kExitUnknown as the failure's code
// says.
int Fail(const absl::Status& status) {
  std::fputs(FailureLine(status).c_str(), stderr);
  return ExitCodeOf(status);
}

// A command's input refused (kExitRefused, as a usage mistake), whatever the status's code.
int Refused(const absl::Status& status) {
  std::fputs(FailureLine(status).c_str(), stderr);
  return kExitRefused;
}

int Usage(const std::string& problem) {
  std::fprintf(stderr, "shardwise: %s\n\n%s", problem.c_str(), kUsage);
  return kExitRefused;
}

// Redraws one line on a terminal; elsewhere (logs, CI) prints a line per state change
// and per twentieth of the steps, so the output stays short.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(fileno(stdout))) {}

  void Update(const v1::Job& job) {
    const std::string line = FormatProgressLine(job);
    if (tty_) {
      // Within the terminal's width: a line that wraps leaves a copy at each redraw.
      std::printf("\r\033[K%s", FitToWidth(line, Columns()).c_str());
      std::fflush(stdout);
      return;
    }
    const int64_t total = std::max<int64_t>(1, job.progress().total_steps());
    const int64_t bucket = job.progress().step() * 20 / total;
    if (job.state() != last_state_ || bucket != last_bucket_) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
    last_state_ = job.state();
    last_bucket_ = bucket;
  }

  void Finish() {
    if (tty_) std::printf("\n");
  }

  // The terminal's width now (it may be resized while a job trains); 0 when unknown.
  static int Columns() {
    struct winsize size {};
    return ioctl(fileno(stdout), TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
  }

 private:
  const bool tty_;
  v1::JobState last_state_ = v1::JOB_STATE_UNSPECIFIED;
  int64_t last_bucket_ = -1;
};

// A watch exits 0 when the job SUCCEEDED, 1 when it ended otherwise, and as Fail when it
// failed: refused (no such job, a token without the right) or the job's end unknown (the
// coordinator could not be reached, or stayed full of watches, past the retries). A script
// reading 1 as "the job failed" is never misled.
int Watch(Client& client, const std::string& job_id) {
  ProgressPrinter printer;
  auto job = client.Watch(
      job_id, [&](const v1::Job& j) { printer.Update(j); },
      [&](const absl::Status& lost) {
        printer.Finish();
        std::fprintf(stderr, "shardwise: watching %s again: %s\n", job_id.c_str(),
                     std::string(lost.message()).c_str());
      });
  printer.Finish();
  if (!job.ok()) return Fail(job.status());
  std::printf("%s", FormatJobSummary(*job).c_str());
  return job->state() == v1::SUCCEEDED ? kExitOk : kExitAnsweredNo;
}

int Scale(Client& client, const std::string& job_id, int32_t replicas) {
  auto job = client.Scale(job_id, replicas);
  if (!job.ok()) return Fail(job.status());
  std::printf("%s: scaled to %d replica group%s; %s\n", job_id.c_str(), replicas,
              replicas == 1 ? "" : "s", FormatProgressLine(*job).c_str());
  return 0;
}

// Proposes the switch, then follows the job until the coordinator has applied or
// abandoned it (it re-proposes by itself when a rank was already past the step).
// A hook switch that failed: refused (not running, the hook in use already, another
// switch being agreed, no such job, no right), exit 2, as a refused watch; one whose fate
// this client could not learn (the coordinator unreachable, busy or late), exit 3, as a
// watch whose job's end is unknown. Never 1, which says the switch was abandoned.
int HookSwitchFailed(const absl::Status& status, const std::string& job_id, const char* what) {
  if (IsRefusal(status)) return Fail(status);
  std::fprintf(stderr, "%sshardwise: %s is unknown; `shardwise describe %s` shows it\n",
               FailureLine(status).c_str(), what, job_id.c_str());
  return kExitUnknown;
}

int SetHook(Client& client, const std::string& job_id, const std::string& hook_name) {
  auto hook =
      ParseCommHook(hook_name, absl::GetFlag(FLAGS_wrapper), "set-hook's HOOK", "--wrapper");
  if (!hook.ok()) return Fail(hook.status());
  auto proposal = client.SetCommHook(job_id, *hook);
  if (!proposal.ok()) return HookSwitchFailed(proposal.status(), job_id, "whether it was proposed");
  std::printf("%s: switch %d proposed: %s -> %s at step %lld\n", job_id.c_str(),
              proposal->version(), CommHookName(proposal->old_hook()).c_str(),
              CommHookName(proposal->new_hook()).c_str(), static_cast<long long>(proposal->step()));
  std::fflush(stdout);
  // The job's versions as they come, until the switch (or the next version it was
  // proposed again as) is decided or the job ends.
  const int32_t version = proposal->version();
  auto job = client.WatchUntil(
      job_id,
      [version](const v1::Job& job) {
        return SwitchOutcomeOf(job, version).outcome != HookSwitchOutcome::kUndecided;
      },
      absl::Now() + absl::Minutes(2));
  if (!job.ok() && job.status().code() == absl::StatusCode::kDeadlineExceeded) {
    std::fprintf(stderr,
                 "shardwise: no decision on the switch after 2 minutes (it may still apply); "
                 "see `shardwise describe %s`\n",
                 job_id.c_str());
    return kExitUnknown;
  }
  if (!job.ok()) return HookSwitchFailed(job.status(), job_id, "whether it applied");
  const SwitchOutcome decided = SwitchOutcomeOf(*job, version);
  switch (decided.outcome) {
    case HookSwitchOutcome::kApplied:
      std::printf("%s: comm hook switched to %s at step %lld\n", job_id.c_str(),
                  CommHookName(decided.newest->new_hook()).c_str(),
                  static_cast<long long>(decided.newest->step()));
      return 0;
    case HookSwitchOutcome::kAbandoned:
      std::fprintf(stderr, "shardwise: switch %d abandoned: %s; the job goes on with %s\n",
                   decided.newest->version(), decided.newest->reason().c_str(),
                   CommHookName(HookInEffect(*job)).c_str());
      return kExitAnsweredNo;
    case HookSwitchOutcome::kEnded:
    case HookSwitchOutcome::kUndecided:  // the watch ends with the job: ended, then
      break;
  }
  std::fprintf(stderr, "shardwise: %s ended (%s) before the switch was decided\n", job_id.c_str(),
               v1::JobState_Name(job->state()).c_str());
  return kExitAnsweredNo;
}

// "up to 43 sequences per rank per micro-step (global_batch_size 43): 79.9 GiB", or
// "up to block_size 3140: 80.0 GiB".
std::string DescribeFit(const Fit& fit, FitDimension dimension) {
  const bool transformer = IsTransformer(fit.spec.model());
  if (dimension == FitDimension::kBlockSize) {
    return absl::StrCat("up to block_size ", fit.value, ": ", FormatBytes(fit.estimate.total()));
  }
  return absl::StrCat("up to ", fit.value, transformer ? " sequences" : " rows",
                      " per rank per micro-step (global_batch_size ", fit.spec.global_batch_size(),
                      "): ", FormatBytes(fit.estimate.total()));
}

// The estimate the coordinator makes at submission, without one: data files are not read
// (a safetensors dataset's bytes count as 0) nor required to exist here.
int Estimate(const std::string& path) {
  const std::string fit_flag = absl::GetFlag(FLAGS_fit);
  absl::StatusOr<int64_t> budget = 0;
  if (!fit_flag.empty()) budget = ParseByteSize(fit_flag);
  if (!budget.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--fit: ", budget.status().message())));
  }
  // A spec it cannot read, or one submit would have refused, exits 2 as submit's do:
  // 1 says that something does not fit.
  auto spec = ReadJobSpecFile(path);
  if (!spec.ok()) return Refused(spec.status());
  // As submit checks it: the coordinator's own limits are its business. Its default
  // limits bound the search below.
  if (absl::Status valid = ValidateJobSpec(*spec, LimitsLifted(), nullptr); !valid.ok()) {
    return Refused(valid);
  }
  const JobLimits limits;
  ApplyJobSpecDefaults(&*spec);
  auto estimate = EstimateRankMemory(*spec);
  if (!estimate.ok()) return Fail(estimate.status());
  std::printf("one rank: %s\n", estimate->ToString().c_str());
  if (fit_flag.empty()) return 0;
  std::printf("fitting %s:\n", FormatBytes(*budget).c_str());
  const int64_t micro_steps =
      int64_t{JobRanks(*spec)} * std::max(1, spec->gradient_accumulation_steps());
  std::vector<std::pair<FitDimension, int64_t>> dimensions = {
      {FitDimension::kMicroBatch, limits.max_global_batch_size / micro_steps}};
  if (IsTransformer(spec->model())) {
    dimensions.push_back({FitDimension::kBlockSize, limits.max_block_size});
  }
  int exit_code = kExitOk;  // kExitAnsweredNo when something does not fit even at 1
  for (const auto& [dimension, max_value] : dimensions) {
    const char* what = dimension == FitDimension::kBlockSize ? "context" : "micro-batch";
    auto fit = LargestFitting(*spec, dimension, *budget, std::max<int64_t>(1, max_value));
    if (!fit.ok()) exit_code = kExitAnsweredNo;
    std::printf("  %s: %s\n", what,
                fit.ok() ? DescribeFit(*fit, dimension).c_str()
                         : std::string(fit.status().message()).c_str());
  }
  return exit_code;
}

// A YAML double-quoted scalar: a name with ": " or "#" in it stays one name.
std::string YamlQuoted(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// `  KEY: ["A", "B"]` for a flag's folders; nothing when none were given; `  KEY: []` for
// "none". A folder must be absolute (the coordinator refuses the file otherwise).
absl::StatusOr<std::string> YamlFolderList(const char* key,
                                           const std::vector<std::string>& folders) {
  if (folders.empty()) return std::string();
  if (folders == std::vector<std::string>{"none"}) return absl::StrCat("    ", key, ": []\n");
  std::vector<std::string> quoted;
  for (const std::string& folder : folders) {
    // A line break would end the YAML entry early and start one of the text after it.
    if (auto printable = CountPrintableCharacters(folder); !printable.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", key, ": '", ShownValue(folder), "' ", printable.status().message()));
    }
    RETURN_IF_ERROR(CheckAbsolutePath(absl::StrCat("--", key), folder));
    quoted.push_back(YamlQuoted(folder));
  }
  return absl::StrCat("    ", key, ": [", absl::StrJoin(quoted, ", "), "]\n");
}

// `    worker_names: ["A", "B*"]` for --worker_names; nothing when none were given.
absl::StatusOr<std::string> YamlWorkerNames(const std::vector<std::string>& patterns) {
  if (patterns.empty()) return std::string();
  std::vector<std::string> quoted;
  for (const std::string& pattern : patterns) {
    RETURN_IF_ERROR(CheckWorkerNamePattern("--worker_names", pattern));
    quoted.push_back(YamlQuoted(pattern));
  }
  return absl::StrCat("    worker_names: [", absl::StrJoin(quoted, ", "), "]\n");
}

// A bound's flag given with no value: left out, the entry would bound nothing, the least
// restrictive entry for what reads as the most (a shell variable that was empty).
absl::Status CheckNoEmptyBound(const std::vector<std::string>& given) {
  const std::vector<std::pair<const char*, std::vector<std::string>>> bounds = {
      {"input_paths", absl::GetFlag(FLAGS_input_paths)},
      {"output_paths", absl::GetFlag(FLAGS_output_paths)},
      {"worker_names", absl::GetFlag(FLAGS_worker_names)}};
  for (const auto& [name, values] : bounds) {
    if (!values.empty() || std::find(given.begin(), given.end(), name) == given.end()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, ": empty; give ",
        std::string(name) == "worker_names" ? "names or patterns (leave the flag out for any)"
                                            : "folders, or none for no folder (leave the flag "
                                              "out for the coordinator's roots alone)"));
  }
  return absl::OkStatus();
}

// The entry's optional lines for `role`: a submitter's or an admin's folders, a worker's
// names.
absl::StatusOr<std::string> EntryBounds(const std::string& role,
                                        const std::vector<std::string>& given) {
  RETURN_IF_ERROR(CheckNoEmptyBound(given));
  ASSIGN_OR_RETURN(const std::string inputs,
                   YamlFolderList("input_paths", absl::GetFlag(FLAGS_input_paths)));
  ASSIGN_OR_RETURN(const std::string outputs,
                   YamlFolderList("output_paths", absl::GetFlag(FLAGS_output_paths)));
  if ((!inputs.empty() || !outputs.empty()) && role != "submitter" && role != "admin") {
    return absl::InvalidArgumentError(
        "--input_paths and --output_paths are for a submitter's or an admin's token");
  }
  ASSIGN_OR_RETURN(const std::string names, YamlWorkerNames(absl::GetFlag(FLAGS_worker_names)));
  if (!names.empty() && role != "worker") {
    return absl::InvalidArgumentError("--worker_names are for a worker's token (--role=worker)");
  }
  return absl::StrCat(inputs, outputs, names);
}

// A client token and the entry for the coordinator's tokens file. The token is printed
// once, here; the coordinator keeps only its hash.
int CreateToken(const std::vector<std::string>& given) {
  const std::string principal = absl::GetFlag(FLAGS_principal);
  const std::string role = absl::GetFlag(FLAGS_role);
  if (principal.empty()) return Usage("token create needs --principal");
  if (absl::Status name = CheckPrincipalName(principal); !name.ok()) {
    return Usage(absl::StrCat("--", name.message()));
  }
  if (role != "viewer" && role != "submitter" && role != "admin" && role != "worker") {
    return Usage(
        absl::StrCat("--role: '", role, "' (expected viewer, submitter, admin or worker)"));
  }
  const absl::StatusOr<std::string> bounds = EntryBounds(role, given);
  if (!bounds.ok()) return Usage(std::string(bounds.status().message()));
  const std::string token = absl::StrCat("sw_", RandomToken(24));
  std::printf("%s\n", token.c_str());
  std::fprintf(stderr,
               "give the token above to %s (keep it secret), and add this to the coordinator's "
               "--tokens_file:\n  - principal: %s\n    role: %s\n    sha256: %s\n%s",
               principal.c_str(), YamlQuoted(principal).c_str(), role.c_str(),
               TokenHash(token).c_str(), bounds->c_str());
  return 0;
}

// --tls_ca / $SHARDWISE_TLS_CA and --token_file / $SHARDWISE_TOKEN.
absl::StatusOr<ClientOptions> ClientOptionsFromFlags() {
  ClientOptions options;
  options.security.ca_file = absl::GetFlag(FLAGS_tls_ca);
  if (options.security.ca_file.empty() && std::getenv("SHARDWISE_TLS_CA") != nullptr) {
    options.security.ca_file = std::getenv("SHARDWISE_TLS_CA");
    options.security.ca_source = "$SHARDWISE_TLS_CA";
  }
  if (const std::string file = absl::GetFlag(FLAGS_token_file); !file.empty()) {
    ASSIGN_OR_RETURN(options.token, ReadBearerToken("--token_file", file));
  } else if (const char* token = std::getenv("SHARDWISE_TOKEN"); token != nullptr) {
    options.token = std::string(absl::StripAsciiWhitespace(token));
    RETURN_IF_ERROR(CheckBearerToken("$SHARDWISE_TOKEN", options.token));
  }
  return options;
}

// `value` as one word of a POSIX shell's command line.
std::string ShellWord(const std::string& value) {
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           (c != '\0' && std::strchr("/._-:,@=+", c) != nullptr);
  });
  if (plain) return value;
  return absl::StrCat("'", absl::StrReplaceAll(value, {{"'", "'\\''"}}), "'");
}

// The command that submits `file` again under `request_id` to the coordinator this one
// asked (the id makes one job on that coordinator only), as this one did: its CA, its
// token file (a token from $SHARDWISE_TOKEN is not printed) and --watch.
std::string SubmitAgainCommand(const Client& client, const std::string& file,
                               const std::string& request_id) {
  std::string command =
      absl::StrCat("shardwise submit ", ShellWord(file), " --request_id=", ShellWord(request_id),
                   " --coordinator=", ShellWord(client.address()));
  if (const std::string ca = absl::GetFlag(FLAGS_tls_ca); !ca.empty()) {
    absl::StrAppend(&command, " --tls_ca=", ShellWord(ca));
  }
  if (const std::string token_file = absl::GetFlag(FLAGS_token_file); !token_file.empty()) {
    absl::StrAppend(&command, " --token_file=", ShellWord(token_file));
  }
  if (absl::GetFlag(FLAGS_watch)) absl::StrAppend(&command, " --watch");
  return command;
}

// A submission that failed: kExitRefused when the coordinator refused it (or it was never
// sent: `request_id` empty), kExitUnknown when whether it made the job is unknown
// (unreachable, busy or late past the retries, or a failure of the coordinator's own),
// with the command that submits it again at most once.
int SubmissionFailed(const Client& client, const absl::Status& status, const std::string& file,
                     const std::string& request_id) {
  if (IsRefusal(status) || request_id.empty()) return Refused(status);
  std::fprintf(stderr,
               "%sshardwise: the job may have been made; submit again with `%s`, which makes "
               "it at most once\n",
               FailureLine(status).c_str(), SubmitAgainCommand(client, file, request_id).c_str());
  return kExitUnknown;
}

// The spec's relative paths made absolute: the coordinator takes absolute paths only, and
// a relative one is this directory's.
absl::Status MakePathsAbsolute(v1::JobSpec* spec) {
  std::error_code unreadable;
  const std::string cwd = std::filesystem::current_path(unreadable).string();
  return ForEachPathField(spec, [&](const PathField& field, std::string* path) {
    if (unreadable && !std::filesystem::path(*path).is_absolute()) {
      return absl::FailedPreconditionError(absl::StrCat(
          field.name, ": '", *path, "' is relative, and the working directory cannot be read (",
          unreadable.message(), "): give an absolute path or submit from a folder that exists"));
    }
    *path = LexicallyNormal(*path, cwd);
    return absl::OkStatus();
  });
}

int SubmitFile(Client& client, const std::string& file) {
  auto spec = ReadJobSpecFile(file);
  if (!spec.ok()) return SubmissionFailed(client, spec.status(), file, "");
  if (const absl::Status absolute = MakePathsAbsolute(&*spec); !absolute.ok()) {
    return SubmissionFailed(client, absolute, file, "");
  }
  std::string request_id = absl::GetFlag(FLAGS_request_id);
  if (request_id.empty()) request_id = RandomToken();
  auto job_id = client.Submit(*spec, request_id);
  if (!job_id.ok()) return SubmissionFailed(client, job_id.status(), file, request_id);
  std::printf("%s\n", job_id->c_str());
  std::fflush(stdout);
  return absl::GetFlag(FLAGS_watch) ? Watch(client, *job_id) : 0;
}

int List(Client& client, const std::string& resource) {
  if (resource == "jobs" || resource == "job") {
    auto filter = JobFilterFromFlags();
    if (!filter.ok()) return Fail(filter.status());
    auto jobs = client.ListJobs(*filter);
    if (!jobs.ok()) return Fail(jobs.status());
    std::printf("%s", FormatJobTable(*jobs, NowMs()).c_str());
    return 0;
  }
  if (resource == "workers" || resource == "worker") {
    auto filter = WorkerFilterFromFlags();
    if (!filter.ok()) return Fail(filter.status());
    auto workers = client.ListWorkers(*filter);
    if (!workers.ok()) return Fail(workers.status());
    std::printf("%s", FormatWorkerTable(*workers, NowMs()).c_str());
    return 0;
  }
  return Usage(absl::StrCat("get: unknown resource '", resource, "' (expected jobs or workers)"));
}

int Describe(Client& client, const std::string& job_id) {
  auto job = client.Get(job_id);
  if (!job.ok()) return Fail(job.status());
  std::printf("%s", FormatJobDescription(*job, NowMs()).c_str());
  return 0;
}

int Cancel(Client& client, const std::string& job_id) {
  auto job = client.Cancel(job_id);
  if (!job.ok()) return Fail(job.status());
  std::printf("%s %s\n", job->id().c_str(), v1::JobState_Name(job->state()).c_str());
  return 0;
}

// Writes the job's timeline as a Chrome trace to --output (or -o, or JOB-trace.json).
int WriteTimeline(Client& client, const std::string& job_id) {
  auto timeline = client.GetTimeline(job_id);
  if (!timeline.ok()) return Fail(timeline.status());
  std::string path = absl::GetFlag(FLAGS_output);
  if (path.empty()) path = absl::GetFlag(FLAGS_o);
  if (path.empty()) path = absl::StrCat(job_id, "-trace.json");
  // Opened before the trace is built, and a failure named with its reason: this machine's
  // (not the coordinator's UNAVAILABLE).
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("--output: cannot write '", path, "': ", std::strerror(errno))));
  }
  file << ChromeTraceJson(*timeline);
  file.close();
  if (!file) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("--output: writing '", path, "' failed: ", std::strerror(errno))));
  }
  int64_t spans = 0, dropped = 0;
  for (const v1::RankTimeline& rank : timeline->ranks()) {
    spans += rank.spans_size();
    dropped += rank.dropped();
  }
  std::printf("%s: %lld spans of %d ranks (attempt %d) written to %s%s\n", job_id.c_str(),
              static_cast<long long>(spans), timeline->ranks_size(), timeline->attempt(),
              path.c_str(),
              dropped > 0 ? absl::StrCat("; ", dropped, " older spans were dropped").c_str() : "");
  return 0;
}

// The commands that talk to a coordinator.
int RunWithClient(Client& client, const std::vector<std::string>& args) {
  const std::string& verb = args[0];
  auto need = [&](size_t n, const char* what) {
    return args.size() == n + 1 ? std::string() : absl::StrCat(verb, " takes ", what);
  };
  std::string problem;
  if (verb == "submit") {
    problem = need(1, "one job spec file");
    return problem.empty() ? SubmitFile(client, args[1]) : Usage(problem);
  }
  if (verb == "get") {
    problem = need(1, "jobs or workers");
    return problem.empty() ? List(client, args[1]) : Usage(problem);
  }
  if (verb == "set-hook") {
    problem = need(2, "a job id and a hook");
    return problem.empty() ? SetHook(client, args[1], args[2]) : Usage(problem);
  }
  if (verb == "scale") {
    problem = need(1, "one job id");
    // A value given, whatever it is, goes to the coordinator, which names the range the
    // job takes; only a missing one is a usage error.
    const std::optional<int32_t> replicas = absl::GetFlag(FLAGS_replicas);
    if (problem.empty() && !replicas.has_value()) problem = "scale needs --replicas=N";
    return problem.empty() ? Scale(client, args[1], *replicas) : Usage(problem);
  }
  const std::map<std::string, int (*)(Client&, const std::string&)> by_job = {
      {"describe", Describe}, {"watch", Watch}, {"cancel", Cancel}, {"timeline", WriteTimeline}};
  if (auto command = by_job.find(verb); command != by_job.end()) {
    problem = need(1, "one job id");
    return problem.empty() ? command->second(client, args[1]) : Usage(problem);
  }
  return Usage(absl::StrCat("unknown command '", verb, "'"));
}

bool IsCompanionCommand(const std::string& word) { return word == "sample" || word == "tokenize"; }

// A companion command (IsCompanionCommand) after flags: its flags are its own program's,
// which this one's flag parsing would refuse as unknown, so it must come first.
// INVALID_ARGUMENT saying so; OK otherwise. `args`: argv without the program's name.
absl::Status CheckCompanionComesFirst(const std::vector<std::string>& args) {
  const std::optional<size_t> command = FirstPositional(args);
  if (!command.has_value() || *command == 0 || !IsCompanionCommand(args[*command])) {
    return absl::OkStatus();
  }
  const std::string& verb = args[*command];
  return absl::InvalidArgumentError(absl::StrCat("`", verb,
                                                 "` comes first on the command line (`shardwise ",
                                                 verb, " --flag=...`): its flags are its own"));
}

// Runs a companion program in this one's place with this command's arguments: `sample`
// the sampler (//worker/tools:shardwise-sample), `tokenize` the tokenizer
// (//tokenizer:shardwise-tokenize).
int RunCompanion(const std::string& verb, int argc, char** argv) {
  const bool sample = verb == "sample";
  auto program = sample
                     ? FindCompanionProgram("shardwise-sample", "worker/tools/shardwise-sample")
                     : FindCompanionProgram("shardwise-tokenize", "tokenizer/shardwise-tokenize");
  // Exits as the companion would have (the usage: 1 for a failure other than a usage
  // mistake), not with a coordinator call's codes.
  absl::Status ran = program.status();
  if (ran.ok()) {
    std::vector<std::string> args = {"shardwise " + verb};
    args.insert(args.end(), argv + 2, argv + argc);
    ran = ExecProgram(*program, args);  // returns only when it could not run the program
  }
  std::fputs(FailureLine(ran).c_str(), stderr);
  return kExitOfflineFailure;
}

// The flags each command takes (by its first words) beyond the connection's, which every
// command takes.
using CommandFlags = std::vector<std::pair<std::string, std::vector<std::string>>>;
const std::vector<std::string>& ConnectionFlags() {
  static const auto* const flags =
      new std::vector<std::string>{"coordinator", "tls_ca", "token_file"};
  return *flags;
}
// The commands that never reach a coordinator: the connection's flags would not apply.
bool IsOfflineCommand(const std::string& command) {
  return command == "token create" || command == "estimate";
}
const CommandFlags& FlagsOfCommands() {
  static const auto* const table = new CommandFlags{
      {"submit", {"watch", "request_id"}},
      {"get jobs", {"state", "submitter", "limit"}},
      {"get job", {"state", "submitter", "limit"}},
      {"get workers", {"state", "device", "limit"}},
      {"get worker", {"state", "device", "limit"}},
      {"describe", {}},
      {"watch", {}},
      {"cancel", {}},
      {"set-hook", {"wrapper"}},
      {"scale", {"replicas"}},
      {"timeline", {"output", "o"}},
      {"token create", {"principal", "role", "input_paths", "output_paths", "worker_names"}},
      {"estimate", {"fit"}},
  };
  return *table;
}

// Usage (2) naming a flag of `given` that the command of `args` does not take.
absl::Status CheckFlagsApply(const std::vector<std::string>& args,
                             const std::vector<std::string>& given) {
  const std::string two_words = args.size() > 1 ? absl::StrCat(args[0], " ", args[1]) : "";
  for (const std::string& command : {two_words, args[0]}) {
    for (const auto& [name, flags] : FlagsOfCommands()) {
      if (name != command) continue;
      static const std::vector<std::string> kNone;
      return CheckFlagsTaken(command, given, flags,
                             IsOfflineCommand(command) ? kNone : ConnectionFlags());
    }
  }
  return absl::OkStatus();  // an unknown command: told as such
}

int Run(const std::vector<std::string>& args, const std::vector<std::string>& given) {
  if (args.empty()) return Usage("no command given");
  if (const absl::Status applies = CheckFlagsApply(args, given); !applies.ok()) {
    return Usage(std::string(applies.message()));
  }
  if (args[0] == "token") {
    if (args.size() != 2 || args[1] != "create") return Usage("token takes create");
    return CreateToken(given);
  }
  if (args[0] == "estimate") {
    if (args.size() != 2) return Usage("estimate takes one job spec file");
    return Estimate(args[1]);
  }
  auto address = ResolveCoordinatorAddress(absl::GetFlag(FLAGS_coordinator));
  if (!address.ok()) return Refused(address.status());
  auto client_options = ClientOptionsFromFlags();
  if (!client_options.ok()) return Fail(client_options.status());
  Client client(*address, *client_options);
  return RunWithClient(client, args);
}

}  // namespace
}  // namespace shardwise

int main(int argc, char** argv) {
  // Paths the user typed are relative to where `bazel run` was typed, when it was.
  if (const absl::Status entered = shardwise::EnterBazelRunWorkingDirectory(); !entered.ok()) {
    std::fputs(shardwise::FailureLine(entered).c_str(), stderr);
    return shardwise::ExitCodeOf(entered);
  }
  // `sample` is the worker's program (it runs the model) and `tokenize` the tokenizer's
  // (its SentencePiece cannot share a process with this one's protobuf).
  if (argc >= 2 && shardwise::IsCompanionCommand(argv[1])) {
    return shardwise::RunCompanion(argv[1], argc, argv);
  }
  const std::vector<std::string> line(argv + 1, argv + argc);
  if (const absl::Status first = shardwise::CheckCompanionComesFirst(line); !first.ok()) {
    return shardwise::Usage(std::string(first.message()));
  }
  absl::SetProgramUsageMessage(shardwise::kUsage);
  std::vector<std::string> given;
  if (const std::optional<int> answered = shardwise::AnswerHelpOrFlagMistake(
          "shardwise", shardwise::kUsage, "client/cli.cc", line, &given)) {
    return *answered;
  }
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> args(positional.begin() + 1, positional.end());
  return shardwise::Run(args, given);
}
