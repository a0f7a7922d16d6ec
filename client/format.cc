#include "client/format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "contracts/comm_hook.h"
#include "contracts/dtype_rules.h"
#include "contracts/job_ranks.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/job_spec_io.h"
#include "contracts/job_state.h"
#include "contracts/membership.h"
#include "contracts/memory_estimate.h"
#include "contracts/prefetch_plan.h"
#include "contracts/validation_loss_text.h"

namespace shardwise {
namespace {

// Left-aligned columns as wide as their widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 3, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string Steps(const v1::Progress& p) { return absl::StrCat(p.step(), "/", p.total_steps()); }

// Whether a loss was read yet. loss_step counts the steps done at the latest read; records
// older than that field carry only the first loss.
bool HasLoss(const v1::Progress& p) {
  return p.loss_step() > 0 || (p.step() > 0 && p.first_loss() != 0);
}

// "0.4322", or "0.4322 after step 48" when the job reads its losses every few steps
// (loss_read_interval_steps) and the latest is older than the step.
std::string Loss(const v1::Progress& p) {
  if (!HasLoss(p)) return "-";
  std::string text = absl::StrFormat("%.4f", p.loss());
  if (p.loss_step() > 0 && p.loss_step() < p.step()) {
    absl::StrAppend(&text, " after step ", p.loss_step());
  }
  return text;
}

// "12.3k" for 12345.
std::string Thousands(double value) {
  return value >= 1e4 ? absl::StrFormat("%.1fk", value / 1e3) : absl::StrFormat("%.0f", value);
}

bool HasValidation(const v1::Progress& p) {
  return p.val_loss_step() > 0 || p.first_val_loss() > 0;
}

std::string FormatTime(int64_t ms) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(ms), absl::LocalTimeZone());
}

// The table's LOSS: "-" until a loss was read. A summary without loss_step (an older
// release's) had one read once a step was done.
std::string SummaryLoss(const v1::JobSummary& job) {
  const bool read = job.loss_step() > 0 || (job.step() > 0 && job.loss() != 0);
  return read ? absl::StrFormat("%.4f", job.loss()) : "-";
}

}  // namespace

std::string FormatAge(int64_t then_ms, int64_t now_ms) {
  const int64_t s = std::max<int64_t>(0, (now_ms - then_ms) / 1000);
  if (s < 120) return absl::StrCat(s, "s");
  if (s < int64_t{2} * 3600) return absl::StrCat(s / 60, "m");
  if (s < int64_t{2} * 86400) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::string FormatJobTable(const std::vector<v1::JobSummary>& jobs, int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "STATE", "WORLD", "STEPS", "LOSS", "ATTEMPT", "SUBMITTER", "AGE", "REASON"}};
  for (const v1::JobSummary& job : jobs) {
    rows.push_back({job.id(), job.name().empty() ? "-" : job.name(), v1::JobState_Name(job.state()),
                    absl::StrCat(job.world_size()),
                    absl::StrCat(job.step(), "/", job.total_steps()), SummaryLoss(job),
                    absl::StrCat(job.attempt()), job.submitter().empty() ? "-" : job.submitter(),
                    FormatAge(job.create_time_ms(), now_ms), job.reason()});
  }
  return Table(rows);
}

namespace {

// "0: NVIDIA H100 80GB HBM3, 79 GiB, sm_90, NCCL 2.28.3, cuDNN 9.19.0", or "-" without a
// GPU.
std::string FormatGpu(const v1::WorkerInfo& w) {
  if (!w.has_gpu()) return "-";
  const v1::GpuInfo& gpu = w.gpu();
  return absl::StrCat(gpu.index(), ": ", gpu.name(), ", ", gpu.memory_bytes() >> 30, " GiB, sm_",
                      gpu.compute_capability_major(), gpu.compute_capability_minor(),
                      gpu.nccl_version().empty() ? "" : ", NCCL ", gpu.nccl_version(),
                      gpu.cudnn_version().empty() ? "" : ", cuDNN ", gpu.cudnn_version());
}

// Why a worker is lost, and, while it lasts, why it is quarantined.
std::string WorkerNote(const v1::WorkerInfo& w, int64_t now_ms) {
  if (w.quarantined_until_ms() <= now_ms) return w.lost_reason();
  return absl::StrCat(w.lost_reason(), w.lost_reason().empty() ? "" : "; ", "quarantined for ",
                      FormatAge(now_ms, w.quarantined_until_ms()),
                      " more: ", w.quarantine_reason());
}

// "read /data; write /data/out" for a worker with folders of its own, "-" without (it
// bounds nothing the coordinator allows).
std::string WorkerFolders(const v1::WorkerInfo& w) {
  if (!w.has_folders()) return "-";
  return absl::StrCat("read ", absl::StrJoin(w.folders().input_roots(), ", "), "; write ",
                      absl::StrJoin(w.folders().output_roots(), ", "));
}

// "2 of 3": the messages its session's heartbeats say it read, of those sent; "? of 3"
// while no heartbeat has counted (or its release does not count); "-" while nothing was
// sent and nothing counted (an idle worker just registered: nothing to read yet).
std::string SessionMessagesRead(const v1::WorkerInfo& w) {
  if (w.session_messages_sent() == 0 && !w.has_session_messages_read()) return "-";
  return absl::StrCat(w.has_session_messages_read() ? absl::StrCat(w.session_messages_read()) : "?",
                      " of ", w.session_messages_sent());
}

}  // namespace

std::string FormatWorkerTable(const std::vector<v1::WorkerInfo>& workers, int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {{"ID", "DEVICE", "STATE", "JOB", "RANK", "CPUS",
                                                 "GPU", "FOLDERS", "FEATURES", "DATA PLANE",
                                                 "LAST HEARTBEAT", "READ", "NOTE"}};
  for (const v1::WorkerInfo& w : workers) {
    const bool assigned = !w.job_id().empty();
    rows.push_back({w.id(), v1::DeviceKind_Name(w.device()), v1::WorkerState_Name(w.state()),
                    assigned ? absl::StrCat(w.job_id(), "#", w.attempt()) : "-",
                    assigned ? absl::StrCat(w.rank()) : "-", absl::StrCat(w.cpu_threads()),
                    FormatGpu(w), WorkerFolders(w),
                    w.features().empty() ? "-" : absl::StrJoin(w.features(), ","),
                    absl::StrCat("v", w.data_plane_version()),
                    absl::StrCat(FormatAge(w.last_heartbeat_ms(), now_ms), " ago"),
                    SessionMessagesRead(w), WorkerNote(w, now_ms)});
  }
  return Table(rows);
}

namespace {

// Folders as a description shows them: comma-separated, "nothing" for none.
std::string FolderList(const google::protobuf::RepeatedPtrField<std::string>& folders) {
  return folders.empty() ? "nothing" : absl::StrJoin(folders, ", ");
}

// describe's sections, each appended to `out`.

void AppendIdentity(const v1::Job& job, int64_t now_ms, std::string* out) {
  absl::StrAppend(out, "Job:        ", job.id(), "\n");
  // What its checkpoints and final model name beside the id (contracts/job_identity.h).
  if (!job.uid().empty()) absl::StrAppend(out, "Uid:        ", job.uid(), "\n");
  absl::StrAppend(out, "Name:       ", job.spec().name().empty() ? "-" : job.spec().name(), "\n");
  absl::StrAppend(out, "State:      ", v1::JobState_Name(job.state()), "\n");
  absl::StrAppend(out, "Reason:     ", job.reason(), "\n");
  // A compacted job keeps no spec but its name: nothing said of it from the spec.
  absl::StrAppend(
      out, "Attempt:    ", job.attempt(), " (restarts ", job.restarts(),
      job.compacted() ? "" : absl::StrCat(" of ", job.spec().restart_policy().max_restarts()),
      ")\n");
  if (!job.compacted()) {
    absl::StrAppend(out, "Joining:    every rank within ", JoinTimeoutSeconds(job.spec()),
                    " s of scheduling (rendezvous.join_timeout_seconds)\n");
  }
  absl::StrAppend(out, "Created:    ", FormatTime(job.create_time_ms()), " (",
                  FormatAge(job.create_time_ms(), now_ms), " ago)\n");
  if (!job.submitter().empty()) absl::StrAppend(out, "Submitter:  ", job.submitter(), "\n");
  if (job.has_submitter_roots()) {
    // The folders the submitter's tokens-file entry kept this job to.
    const v1::SubmitterRoots& roots = job.submitter_roots();
    absl::StrAppend(out, "Folders:    reads under ", FolderList(roots.input_roots()),
                    "; writes under ", FolderList(roots.output_roots()), " (", roots.principal(),
                    "'s, with the coordinator's)\n");
  }
  // A compacted job keeps no spec: the step alone would name no folder.
  if (job.has_init_checkpoint_step() && !job.spec().init().checkpoint_dir().empty()) {
    // Where every attempt without a checkpoint of the job's own starts.
    absl::StrAppend(out, "Starts at:  step ", job.init_checkpoint_step(), " of ",
                    job.spec().init().checkpoint_dir(), " (init.checkpoint_dir)\n");
  }
  if (job.has_checkpoint_step() && !job.spec().output().checkpoint_dir().empty()) {
    // Where a restart resumes from (unless that step is damaged by then).
    absl::StrAppend(out, "Checkpoint: step ", job.checkpoint_step(), " in ",
                    job.spec().output().checkpoint_dir(), " (output.checkpoint_dir)\n");
  }
}

void AppendProgress(const v1::Progress& p, std::string* out) {
  absl::StrAppend(out, "Progress:   ", Steps(p), " steps",
                  p.step() > 0 ? absl::StrFormat(", loss %s (first %.4f), %.2f steps/s", Loss(p),
                                                 p.first_loss(), p.steps_per_second())
                               : "",
                  p.phase().empty() ? "" : absl::StrCat(", phase ", p.phase()), "\n");
  if (p.step() > 0 && (p.tokens_per_second() > 0 || p.learning_rate() > 0)) {
    absl::StrAppend(out, "Throughput: ",
                    p.tokens_per_second() > 0
                        ? absl::StrCat(Thousands(p.tokens_per_second()), " tokens/s, ")
                        : "",
                    absl::StrFormat("learning rate %.3g\n", p.learning_rate()));
  }
  if (HasValidation(p)) {
    absl::StrAppend(
        out,
        absl::StrFormat("Validation: loss %.4f after step %d", p.val_loss(), p.val_loss_step()),
        p.first_val_loss_step() == p.val_loss_step()
            ? ""
            : absl::StrFormat(" (first %.4f)", p.first_val_loss()),
        "\n");
  }
  if (p.step() > 0) {
    constexpr double kMiB = 1 << 20;
    absl::StrAppend(out,
                    absl::StrFormat("Traffic:    rank 0: %.1f MiB all-gathered, %.1f MiB "
                                    "reduce-scattered, %.1f MiB all-reduced; last step %.1f ms\n",
                                    p.all_gather_bytes() / kMiB, p.reduce_scatter_bytes() / kMiB,
                                    p.all_reduce_bytes() / kMiB, p.step_seconds() * 1000));
  }
}

// Precision, memory, the hook in effect and the loss scale.
void AppendNumerics(const v1::Job& job, std::string* out) {
  const v1::MixedPrecision& mp = job.spec().fsdp().mixed_precision();
  absl::StrAppend(out, "Precision:  params ", v1::Dtype_Name(EffectiveParamDtype(mp)),
                  ", reduction ", v1::Dtype_Name(EffectiveReduceDtype(mp)), ", optimizer sees ",
                  v1::Dtype_Name(ReducedGradientDtype(mp)), " gradients\n");
  if (job.memory_per_rank().total_bytes() > 0) {
    absl::StrAppend(out, "Memory:     about ", DescribeMemoryEstimate(job.memory_per_rank()),
                    " per rank (estimated)\n");
  }
  const v1::Progress& progress = job.progress();
  if (progress.peak_allocated_bytes() > 0) {
    // Measured beside the estimate above, which bounds the allocated bytes.
    absl::StrAppend(out, "Peak:       ", FormatBytes(progress.peak_allocated_bytes()),
                    " allocated, ", FormatBytes(progress.peak_reserved_bytes()),
                    " reserved on rank 0 so far\n");
  }
  absl::StrAppend(out, "Comm hook:  ", CommHookName(HookInEffect(job)));
  for (const v1::HookSwitch& s : job.hook_switches()) {
    if (s.state() == v1::HookSwitch::APPLIED) {
      absl::StrAppend(out, " (from step ", s.step(), ", switch ", s.version(), ")");
    }
  }
  absl::StrAppend(out, "\n");
  if (job.spec().grad_scaler().enabled()) {
    const v1::Progress& p = job.progress();
    const v1::GradScalerState& scaler = p.grad_scaler();
    absl::StrAppend(out, "Loss scale: ",
                    p.step() > 0 ? absl::StrFormat("%g (%d steps skipped for inf/NaN, %d clean "
                                                   "steps since the last change)",
                                                   scaler.scale(), scaler.skipped_steps(),
                                                   scaler.growth_tracker())
                                 : std::string("not reported yet"),
                    "\n");
  }
}

// The execution order, its prefetch plan, and the hook switches.
void AppendAgreements(const v1::Job& job, std::string* out) {
  if (job.has_execution_order()) {
    absl::StrAppend(out, "Exec order: ", FormatExecutionOrder(job.execution_order()), "\n");
    absl::StrAppend(out, "Prefetch:   plan ", FormatPrefetchPlan(job.prefetch_plan()), "\n");
    if (job.progress().prefetch_plan_version() > 0) {
      absl::StrAppend(out, "            the ranks follow version ",
                      job.progress().prefetch_plan_version(), " since step ",
                      job.progress().prefetch_plan_since_step(), "\n");
    }
  }
  if (!job.hook_switches().empty()) {
    absl::StrAppend(out, "Hook switches:\n");
    for (const v1::HookSwitch& s : job.hook_switches()) {
      absl::StrAppend(out, "  ", s.version(), "  ", CommHookName(s.old_hook()), " -> ",
                      CommHookName(s.new_hook()), " at step ", s.step(), "  ",
                      v1::HookSwitch::State_Name(s.state()),
                      s.reason().empty() ? "" : absl::StrCat(": ", s.reason()), "\n");
    }
  }
}

// Whether the job's current attempt trains without some of its ranks (fault tolerance).
bool Degraded(const v1::Job& job) {
  return job.membership().epoch() > 0 && job.membership().attempt() == job.attempt();
}

// The history a run is reproduced from, every attempt's: each epoch's first step (which
// its leader reported once the ranks moved to it), the step it was decided at, and why.
void AppendMembershipHistory(const v1::Job& job, std::string* out) {
  if (job.membership_history().empty()) return;
  absl::StrAppend(out, "Membership history:\n");
  for (int i = 0; i < job.membership_history_size(); ++i) {
    if (i == job.membership_epochs_omitted_after() && job.membership_epochs_omitted() > 0) {
      absl::StrAppend(
          out, "  ... ", job.membership_epochs_omitted(),
          " epochs omitted (their decisions and first steps are among the job's events) ...\n");
    }
    const v1::MembershipEpoch& epoch = job.membership_history(i);
    const std::string when =
        epoch.has_first_step()
            ? absl::StrCat(" from step ", epoch.first_step(), " (decided at step ",
                           epoch.decided_at_step(), ")")
            : absl::StrCat(" (decided at step ", epoch.decided_at_step(), "; not trained)");
    absl::StrAppend(out, "  ", FormatTime(epoch.time_ms()), "  attempt ", epoch.attempt(),
                    "  epoch ", epoch.epoch(), when, ": ranks ",
                    absl::StrJoin(epoch.live_ranks(), ", "), "  (", epoch.cause(), ")\n");
  }
}

// A fault-tolerant job's replicas: who trains and who left; for any other job, what a
// lost rank does to it (docs/operations.md).
void AppendMembership(const v1::Job& job, std::string* out) {
  if (!job.spec().has_fault_tolerance()) {
    const auto strategy = job.spec().fsdp().sharding_strategy();
    const bool sharded = strategy == v1::ShardingStrategy::FULL_SHARD ||
                         strategy == v1::ShardingStrategy::SHARD_GRAD_OP;
    absl::StrAppend(out, "Replicas:   no fault tolerance: a lost rank fails the attempt",
                    sharded ? " (no other rank holds its shard)" : "",
                    "; restart_policy re-queues it from its newest checkpoint\n");
    return;
  }
  const v1::Membership& m = job.membership();
  const int32_t ranks = JobRanks(job.spec());
  if (!Degraded(job) && ranks == job.spec().world_size()) {
    absl::StrAppend(out, "Replicas:   all ", job.spec().world_size(),
                    " ranks train (fault tolerance: min_replicas ",
                    std::max(1, job.spec().fault_tolerance().min_replicas()), ")\n");
    return AppendMembershipHistory(job, out);
  }
  // A job that may grow starts with ranks 0 to world_size - 1 of its ranks (epoch 0).
  const std::vector<int32_t> live = LiveRanks(job.spec(), m, job.attempt());
  absl::StrAppend(out, "Replicas:   epoch ", Degraded(job) ? m.epoch() : 0, ": ", live.size(),
                  " of ", ranks, " ranks train (", absl::StrJoin(live, ", "), ")");
  if (Degraded(job) && m.left_ranks_size() > 0) {
    absl::StrAppend(out, "; ranks ", absl::StrJoin(m.left_ranks(), ", "), " left");
  }
  absl::StrAppend(out, "\n");
  if (ranks != job.spec().world_size()) {
    absl::StrAppend(out, "            started with ", InitialReplicas(job.spec()), " replica group",
                    InitialReplicas(job.spec()) == 1 ? "" : "s", " (world_size ",
                    job.spec().world_size(), "), grows to at most ", MaxReplicas(job.spec()),
                    " (fault_tolerance.max_replicas)\n");
  }
  if (job.target_replicas() > 0) {
    absl::StrAppend(out, "            scaled to ", job.target_replicas(), " replica group",
                    job.target_replicas() == 1 ? "" : "s", " (shardwise scale)\n");
  }
  AppendMembershipHistory(job, out);
}

void AppendRanksAndEvents(const v1::Job& job, std::string* out) {
  absl::StrAppend(out, "Ranks:\n");
  if (job.ranks().empty()) absl::StrAppend(out, "  (none assigned)\n");
  // A fault-tolerant attempt's ranks that left are marked: their workers no longer train.
  const std::vector<int32_t> live = job.spec().has_fault_tolerance()
                                        ? LiveRanks(job.spec(), job.membership(), job.attempt())
                                        : std::vector<int32_t>();
  for (const auto& r : job.ranks()) {
    const bool left = job.spec().has_fault_tolerance() &&
                      std::find(live.begin(), live.end(), r.rank()) == live.end();
    absl::StrAppend(out, "  rank ", r.rank(), "  worker ", r.worker_id(),
                    left ? "  (left the attempt)" : "", "\n");
  }
  absl::StrAppend(out, "Events:\n");
  for (int i = 0; i < job.events_size(); ++i) {
    if (i == job.events_omitted_after() && job.events_omitted() > 0) {
      absl::StrAppend(out, "  ... ", job.events_omitted(),
                      " events left out here (the coordinator's state file keeps them)\n");
    }
    const v1::JobEvent& e = job.events(i);
    absl::StrAppend(out, "  ", FormatTime(e.time_ms()), "  attempt ", e.attempt(), "  ",
                    v1::JobState_Name(e.state()), "  ", e.message(), "\n");
  }
}

}  // namespace

std::string FormatJobDescription(const v1::Job& job, int64_t now_ms) {
  std::string out;
  AppendIdentity(job, now_ms, &out);
  const v1::Progress& p = job.progress();
  if (job.compacted()) {
    absl::StrAppend(&out, "Progress:   ", Steps(p), " steps, loss ", Loss(p), "\n",
                    "Compacted:  it ended longer ago than the coordinator's retention "
                    "(--job_retention_hours); its spec, events and timeline are no longer "
                    "kept\n");
    return out;
  }
  AppendProgress(p, &out);
  AppendNumerics(job, &out);
  AppendAgreements(job, &out);
  AppendMembership(job, &out);
  if (!job.result().empty()) absl::StrAppend(&out, "Result:     ", job.result(), "\n");
  AppendRanksAndEvents(job, &out);
  absl::StrAppend(&out, "Spec (with defaults):\n", JobSpecToJson(job.spec()));
  return out;
}

std::string FormatProgressLine(const v1::Job& job, int width) {
  const v1::Progress& p = job.progress();
  const double fraction =
      p.total_steps() > 0 ? std::min(1.0, static_cast<double>(p.step()) / p.total_steps()) : 0.0;
  const int filled = static_cast<int>(std::lround(fraction * width));
  std::string line = absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'),
                                  "] ", Steps(p), " steps");
  if (p.step() > 0) {
    absl::StrAppend(&line, "  loss ", Loss(p));
    if (HasValidation(p)) absl::StrAppend(&line, absl::StrFormat("  val %.4f", p.val_loss()));
    if (p.learning_rate() > 0)
      absl::StrAppend(&line, absl::StrFormat("  lr %.2g", p.learning_rate()));
    absl::StrAppend(&line, p.tokens_per_second() > 0
                               ? absl::StrCat("  ", Thousands(p.tokens_per_second()), " tok/s")
                               : absl::StrFormat("  %.2f steps/s", p.steps_per_second()));
  }
  absl::StrAppend(&line, "  ", v1::JobState_Name(job.state()));
  if (!p.phase().empty() && !IsTerminal(job.state())) absl::StrAppend(&line, " (", p.phase(), ")");
  // What a waiting job waits for ("waiting for 4 CPU workers, but only 2 are registered"):
  // a bar that never moves would say nothing.
  if (job.state() == v1::PENDING && !job.reason().empty()) {
    absl::StrAppend(&line, ": ", job.reason());
  }
  if (Degraded(job)) {
    absl::StrAppend(&line, "  ", job.membership().live_ranks_size(), "/", JobRanks(job.spec()),
                    " ranks (epoch ", job.membership().epoch(), ")");
  }
  return line;
}

std::string FitToWidth(const std::string& line, int columns) {
  // Characters, not bytes (a reason may hold names in any script).
  const auto starts_character = [&](size_t i) {
    return (static_cast<unsigned char>(line[i]) & 0xC0) != 0x80;
  };
  int64_t characters = 0;
  for (size_t i = 0; i < line.size(); ++i) characters += starts_character(i) ? 1 : 0;
  if (columns <= 0 || characters <= columns) return line;
  // Keep columns - 1 characters, then "…".
  int64_t kept = 0;
  size_t cut = 0;
  while (cut < line.size() && !(starts_character(cut) && kept == columns - 1)) {
    if (starts_character(cut)) ++kept;
    ++cut;
  }
  return line.substr(0, cut) + "\u2026";
}

std::string FormatJobSummary(const v1::Job& job) {
  const v1::Progress& p = job.progress();
  std::string out =
      absl::StrCat(job.id(), " ", v1::JobState_Name(job.state()), ": ", job.reason(), "\n");
  absl::StrAppend(&out, "  steps:  ", Steps(p), "\n");
  if (p.step() > 0) {
    absl::StrAppend(&out, absl::StrFormat("  loss:   %.4f -> %s\n", p.first_loss(), Loss(p)));
    absl::StrAppend(&out, absl::StrFormat("  speed:  %.2f steps/s", p.steps_per_second()),
                    p.tokens_per_second() > 0
                        ? absl::StrCat(", ", Thousands(p.tokens_per_second()), " tokens/s")
                        : "",
                    "\n");
  }
  if (HasValidation(p)) {
    absl::StrAppend(&out, "  validation loss: ",
                    ValidationLossText(p.first_val_loss(), p.first_val_loss_step(), p.val_loss(),
                                       p.val_loss_step()),
                    "\n");
  }
  if (p.peak_allocated_bytes() > 0) {
    absl::StrAppend(
        &out, "  memory: peak ", FormatBytes(p.peak_allocated_bytes()), " allocated on rank 0",
        job.memory_per_rank().total_bytes() > 0
            ? absl::StrCat(" (estimated ", FormatBytes(job.memory_per_rank().total_bytes()),
                           " per rank)")
            : "",
        "\n");
  }
  if (!job.result().empty()) absl::StrAppend(&out, "  result: ", job.result(), "\n");
  if (Degraded(job)) {
    absl::StrAppend(&out, "  replicas: ranks ", absl::StrJoin(job.membership().live_ranks(), ", "),
                    " trained to the end");
    if (job.membership().left_ranks_size() > 0) {
      absl::StrAppend(&out, "; ranks ", absl::StrJoin(job.membership().left_ranks(), ", "),
                      " left");
    }
    const int64_t changes = job.membership_history_size() + job.membership_epochs_omitted();
    absl::StrAppend(&out, " (epoch ", job.membership().epoch(), ", ", changes, " membership change",
                    changes == 1 ? "" : "s", ")\n");
  }
  if (!job.spec().output().final_model_path().empty() && job.state() == v1::SUCCEEDED &&
      p.step() > 0) {
    absl::StrAppend(&out, "  model:  ", job.spec().output().final_model_path(), "\n");
  }
  return out;
}

}  // namespace shardwise
