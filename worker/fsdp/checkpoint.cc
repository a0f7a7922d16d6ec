#include "worker/fsdp/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/safe_write.h"
#include "common/status_macros.h"
#include "common/untrusted_file.h"
#include "contracts/checkpoint_files.h"
#include "contracts/checkpoint_fit.h"
#include "contracts/element_range.h"
#include "contracts/safetensors.h"
#include "google/protobuf/util/json_util.h"

namespace shardwise::fsdp {
namespace {

namespace fs = std::filesystem;

std::string Superseded(const CheckpointAuthor& author, int32_t later, const std::string& where) {
  return absl::StrCat("attempt ", later, " of job ", author.job_id, " wrote ", where,
                      ": this attempt (", author.attempt,
                      ") was superseded (its worker lost the coordinator, which ran the job "
                      "again elsewhere) and writes no more checkpoints");
}

// FAILED_PRECONDITION when a step of `dir` was written by a later attempt of the job.
absl::Status CheckNotSuperseded(const std::string& dir, const CheckpointAuthor& author) {
  ASSIGN_OR_RETURN(const auto steps, CheckpointSteps(dir));
  for (const auto& [step, folder] : steps) {
    const absl::StatusOr<v1::CheckpointManifest> manifest = ReadCheckpointManifest(folder);
    if (absl::IsUnavailable(manifest.status())) return manifest.status();
    if (manifest.ok() && author.SameJob(*manifest) && manifest->attempt() > author.attempt) {
      return absl::FailedPreconditionError(Superseded(author, manifest->attempt(), folder));
    }
  }
  return absl::OkStatus();
}

// ALREADY_EXISTS when step folder `folder` holds another job's checkpoint: two jobs
// writing one output.checkpoint_dir (one started from the other's, say) would replace
// each other's steps, and a step left with shards of both would be neither's.
absl::Status CheckNotAnotherJobs(const std::string& folder, const CheckpointAuthor& author) {
  const absl::StatusOr<v1::CheckpointManifest> there = ReadCheckpointManifest(folder);
  if (absl::IsUnavailable(there.status())) return there.status();
  if (!there.ok() || author.SameJob(*there)) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      "output.checkpoint_dir: '", folder, "' holds the checkpoint of ",
      OtherJobName(ManifestWriter(*there), author.job()),
      "; a job never replaces another's (give each job a checkpoint_dir of its own; one may "
      "start from another's with init.checkpoint_dir)"));
}

// Where a tensor of a rank's checkpoint shard comes from: unit `unit`'s parameter shard
// (`state` null) or one of its optimizer state buffers; each F32 of the shard's size.
struct ShardTensorSource {
  int unit = 0;
  const Buffer* state = nullptr;
};

std::map<std::string, ShardTensorSource> ShardTensorSources(const FsdpModel& model,
                                                            const Optimizer& optimizer) {
  std::map<std::string, ShardTensorSource> sources;
  for (int u = 0; u < model.num_units(); ++u) {
    if (model.shard_numel(u) == 0) continue;
    sources[CheckpointTensorName(u, "param")] = {u, nullptr};
    for (const auto& [name, buffer] : optimizer.SegmentState(u)) {
      sources[CheckpointTensorName(u, name)] = {u, buffer};
    }
  }
  return sources;
}

// Copies the tensor from the model's device (where shards and optimizer state live) and
// appends it: one tensor in host memory at a time, never the whole shard.
absl::Status AppendShardTensor(const FsdpModel& model, const ShardTensorSource& source,
                               FileAppender& file) {
  std::vector<float> host;
  if (source.state == nullptr) {
    ASSIGN_OR_RETURN(host, model.ShardToHost(source.unit));
  } else {
    host.resize(source.state->numel());
    RETURN_IF_ERROR(
        model.device()->CopyToHost(host.data(), source.state->data(), source.state->bytes()));
  }
  const size_t numel = static_cast<size_t>(model.shard_numel(source.unit));
  if (host.size() < numel) {
    return absl::InternalError(absl::StrCat("a checkpoint tensor of unit ", source.unit, " holds ",
                                            host.size(), " values, its shard ", numel));
  }
  return file.Append(
      absl::string_view(reinterpret_cast<const char*>(host.data()), numel * sizeof(float)));
}

}  // namespace

uint64_t CheckpointShardBytes(const FsdpModel& model, const Optimizer& optimizer) {
  uint64_t bytes = 0;
  for (const auto& [name, source] : ShardTensorSources(model, optimizer)) {
    bytes += static_cast<uint64_t>(model.shard_numel(source.unit)) * sizeof(float);
  }
  return bytes;
}

std::string OptimizerKind(const v1::OptimizerSpec& optimizer) {
  return optimizer.has_adamw() ? "adamw" : "sgd";
}

absl::Status WriteCheckpointShard(const std::string& dir, int64_t step,
                                  const CheckpointAuthor& author, const FsdpModel& model,
                                  const Optimizer& optimizer) {
  const ShardingPlan& plan = model.plan();
  if (plan.replicate_rank != 0) return absl::OkStatus();
  const std::string folder = CheckpointFolder(dir, step);
  if (absl::Status created = CreateFolders(folder); !created.ok()) {
    return absl::Status(created.code(), absl::StrCat("output.checkpoint_dir: ", created.message()));
  }
  RETURN_IF_ERROR(CheckNotAnotherJobs(folder, author));
  // A later attempt's step here already: not overwritten with this one's shard.
  if (const absl::StatusOr<v1::CheckpointManifest> there = ReadCheckpointManifest(folder);
      there.ok() && author.SameJob(*there) && there->attempt() > author.attempt) {
    return absl::FailedPreconditionError(Superseded(author, there->attempt(), folder));
  }
  Metadata writer = WriterEntries(author.job());
  writer[kCheckpointAttemptKey] = absl::StrCat(author.attempt);
  const std::map<std::string, ShardTensorSource> sources = ShardTensorSources(model, optimizer);
  TensorLayouts layouts;
  for (const auto& [name, source] : sources) {
    const int64_t numel = model.shard_numel(source.unit);
    layouts[name] = {"F32", {numel}, static_cast<uint64_t>(numel) * sizeof(float)};
  }
  return WriteSafetensorsStreamed(absl::StrCat(folder, "/", CheckpointShardFile(plan.shard_rank)),
                                  layouts, writer,
                                  [&](const std::string& name, FileAppender& file) {
                                    return AppendShardTensor(model, sources.at(name), file);
                                  });
}

absl::Status WriteCheckpointManifest(const std::string& dir, int64_t step,
                                     const CheckpointAuthor& author, const v1::JobSpec& spec,
                                     const FsdpModel& model, const Optimizer& optimizer,
                                     const v1::GradScalerState* scaler) {
  RETURN_IF_ERROR(CheckNotSuperseded(dir, author));
  RETURN_IF_ERROR(CheckNotAnotherJobs(CheckpointFolder(dir, step), author));
  v1::CheckpointManifest manifest;
  if (scaler != nullptr) *manifest.mutable_grad_scaler() = *scaler;
  manifest.set_job_id(author.job_id);
  manifest.set_job_uid(author.job_uid);
  manifest.set_attempt(author.attempt);
  manifest.set_step(step);
  manifest.set_optimizer_steps(optimizer.steps());
  manifest.set_optimizer(OptimizerKind(spec.optimizer()));
  manifest.set_world_size(model.plan().world_size);
  manifest.set_shard_group_size(model.plan().shard_size);
  for (int u = 0; u < model.num_units(); ++u) {
    auto* unit = manifest.add_units();
    unit->set_numel(model.unit_numel(u));
    unit->set_padded_numel(model.padded_numel(u));
  }
  *manifest.mutable_model() = spec.model();
  *manifest.mutable_wrap() = spec.wrap();
  for (int s = 0; s < model.plan().shard_size; ++s) manifest.add_files(CheckpointShardFile(s));
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (const auto printed = google::protobuf::util::MessageToJsonString(manifest, &json, options);
      !printed.ok()) {
    return absl::InternalError(
        absl::StrCat("writing the manifest of step ", step, ": ", printed.message().as_string()));
  }
  // The job's own checkpoint: written again by an attempt that resumes before it.
  return WriteFileAtomically(absl::StrCat(CheckpointFolder(dir, step), "/", kCheckpointManifest),
                             json,
                             /*replace=*/true);
}

namespace {

// The step folders of `author`'s job in `dir` before `step` that output.keep_checkpoints
// removes, by name: all but the newest `keep` - 1 complete ones. A later attempt's step
// anywhere in `dir` (it may be reading any of them) is FAILED_PRECONDITION, a step this
// host could not read now UNAVAILABLE: nothing is removed then.
absl::StatusOr<std::vector<std::string>> OlderCheckpointsToRemove(const std::string& dir,
                                                                  int64_t step,
                                                                  const CheckpointAuthor& author,
                                                                  int keep) {
  ASSIGN_OR_RETURN(const auto steps, CheckpointSteps(dir));
  std::vector<std::string> doomed;
  int kept = 0;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {  // newest first
    const auto& [folder_step, folder] = *it;
    const absl::StatusOr<v1::CheckpointManifest> manifest = ReadCheckpointManifest(folder);
    if (absl::IsUnavailable(manifest.status())) return manifest.status();
    if (!manifest.ok() || !author.SameJob(*manifest)) continue;
    if (manifest->attempt() > author.attempt) {
      return absl::FailedPreconditionError(Superseded(author, manifest->attempt(), folder));
    }
    if (folder_step >= step) continue;
    const absl::Status complete = CheckCheckpointComplete(folder, folder_step, *manifest);
    if (absl::IsUnavailable(complete)) return complete;
    // Damaged for sure (DATA_LOSS: shards of two attempts, one missing or malformed) goes;
    // one this worker may not read (a shard's permissions, a link) is not its to judge.
    if (!complete.ok() && !absl::IsDataLoss(complete)) continue;
    if (complete.ok() && kept < keep - 1) {
      ++kept;
    } else {
      doomed.push_back(fs::path(folder).filename().string());
    }
  }
  return doomed;
}

// OlderCheckpointsToRemove, once step `step` is a complete checkpoint of the job (none
// otherwise): one mixed since with another attempt's or job's shards would leave the job
// nothing to resume from.
absl::StatusOr<std::vector<std::string>> CheckpointsToRemove(const std::string& dir, int64_t step,
                                                             const CheckpointAuthor& author,
                                                             int keep) {
  const std::string written = CheckpointFolder(dir, step);
  const absl::StatusOr<v1::CheckpointManifest> manifest = ReadCheckpointManifest(written);
  if (absl::IsUnavailable(manifest.status())) return manifest.status();
  if (!manifest.ok() || !author.SameJob(*manifest)) return std::vector<std::string>();
  const absl::Status complete = CheckCheckpointComplete(written, step, *manifest);
  if (absl::IsUnavailable(complete)) return complete;
  if (!complete.ok()) return std::vector<std::string>();
  return OlderCheckpointsToRemove(dir, step, author, keep);
}

}  // namespace

absl::StatusOr<int> RemoveOlderCheckpoints(const std::string& dir, int64_t step,
                                           const CheckpointAuthor& author, int keep) {
  if (keep <= 0) return 0;  // every checkpoint kept
  // What a removal cut short left (a crash, a failed unlink); one that cannot go (a folder
  // put inside) is reported once the pruning below is done, not in its way.
  const absl::Status leftovers = RemoveInterruptedRemovals(dir, "step-");
  ASSIGN_OR_RETURN(const std::vector<std::string> doomed,
                   CheckpointsToRemove(dir, step, author, keep));
  int removed = 0;
  for (const std::string& name : doomed) {
    const absl::Status gone = RemoveFolderOfFiles(dir, name);
    if (absl::IsNotFound(gone)) continue;  // another leader of the job removed it first
    RETURN_IF_ERROR(gone);
    ++removed;
  }
  RETURN_IF_ERROR(leftovers);
  return removed;
}

namespace {

absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& folder) {
  absl::StatusOr<v1::CheckpointManifest> manifest = ReadCheckpointManifest(folder);
  if (absl::IsNotFound(manifest.status())) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': no manifest"));
  }
  return manifest;
}

// What a rank of `plan` reads of a checkpoint whose manifest fits its job
// (contracts/checkpoint_fit.h): its own shard of every unit's parameters and optimizer
// state, cut from the shard files one file at a time (one descriptor open however large
// the writers' group), never a file whole: a rank's host memory holds its own shards,
// not every rank's.
class RankCheckpointReader {
 public:
  // `state_names`: the optimizer states the job's optimizer keeps, each unit's in the
  // checkpoint to be all of these or none; empty: an optimizer of another kind wrote it,
  // whose states are not read.
  RankCheckpointReader(const std::string& folder, const v1::CheckpointManifest& manifest,
                       const ShardingPlan& plan, std::vector<std::string> state_names)
      : folder_(folder), manifest_(manifest), plan_(plan), state_names_(std::move(state_names)) {}

  // Fills the unit vectors below from every shard file.
  absl::Status ReadAll();

  // Per unit: this rank's shard of its flat parameters, and of each optimizer state.
  std::vector<std::vector<float>> params;
  std::vector<std::map<std::string, std::vector<float>>> states;

 private:
  // The names of unit `u`'s optimizer states in `shard` (the first file decides): all of
  // state_names_ or none, else DATA_LOSS (a resumed optimizer would step through a
  // state it does not hold).
  absl::StatusOr<std::vector<std::string>> StateNames(const CheckpointShard& shard, int u) const;
  // The writers' shard size of unit `u`.
  int64_t WrittenShardNumel(int u) const {
    return manifest_.units(u).padded_numel() / manifest_.shard_group_size();
  }
  // OK if `shard` holds every unit's parameters and the states the first file holds, each
  // as F32 [WrittenShardNumel] (DATA_LOSS naming the first that it lacks).
  absl::Status CheckEntries(const CheckpointShard& shard) const;
  // Copies what shard file `s` holds of unit `u`'s `what` into `out`, which starts at the
  // unit's element `begin` (the rest, and the padding past the unit's end, untouched).
  absl::Status Copy(const CheckpointShard& shard, int s, int u, const std::string& what,
                    int64_t begin, std::vector<float>* out) const;

  const std::string& folder_;
  const v1::CheckpointManifest& manifest_;
  const ShardingPlan& plan_;
  const std::vector<std::string> state_names_;
};

absl::StatusOr<std::vector<std::string>> RankCheckpointReader::StateNames(
    const CheckpointShard& shard, int u) const {
  if (state_names_.empty()) return std::vector<std::string>();
  std::vector<std::string> names;
  const std::string prefix = CheckpointTensorName(u, "");
  const auto& tensors = shard.index.tensors;
  for (auto it = tensors.lower_bound(prefix); it != tensors.end(); ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    const std::string state = it->first.substr(prefix.size());
    if (state != "param") names.push_back(state);
  }
  std::vector<std::string> expected = state_names_;
  std::sort(expected.begin(), expected.end());  // as the tensors' names are
  if (names.empty() || names == expected) return names;
  return absl::DataLossError(
      absl::StrCat("checkpoint '", folder_, "': ", shard.name, " holds the optimizer states ",
                   absl::StrJoin(names, ", "), " of unit ", u, "; its ", manifest_.optimizer(),
                   " optimizer keeps ", absl::StrJoin(expected, ", "), " (all of them or none)"));
}

absl::Status RankCheckpointReader::CheckEntries(const CheckpointShard& shard) const {
  for (int u = 0; u < manifest_.units_size(); ++u) {
    if (manifest_.units(u).numel() == 0) continue;
    std::vector<std::string> names = {"param"};
    for (const auto& [state, values] : states[u]) names.push_back(state);
    for (const std::string& what : names) {
      const auto it = shard.index.tensors.find(CheckpointTensorName(u, what));
      if (it == shard.index.tensors.end() || it->second.dtype != "F32" ||
          it->second.shape != std::vector<int64_t>{WrittenShardNumel(u)}) {
        return absl::DataLossError(absl::StrCat("checkpoint '", folder_, "': ", shard.name,
                                                " lacks ", CheckpointTensorName(u, what),
                                                " as F32 [", WrittenShardNumel(u), "]"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RankCheckpointReader::Copy(const CheckpointShard& shard, int s, int u,
                                        const std::string& what, int64_t begin,
                                        std::vector<float>* out) const {
  // What the file holds of the unit's elements (its padding left out) and `out` wants.
  const ElementRange file = ShardElements(s, WrittenShardNumel(u));
  const ElementRange wanted = Intersect({begin, begin + static_cast<int64_t>(out->size())},
                                        {0, manifest_.units(u).numel()});
  const ElementRange read_range = Intersect(file, wanted);
  if (read_range.empty()) return absl::OkStatus();
  const SafetensorsEntry& entry = shard.index.tensors.at(CheckpointTensorName(u, what));
  const absl::Status read =
      shard.file.ReadAt(entry.begin + (read_range.begin - file.begin) * sizeof(float),
                        read_range.size() * sizeof(float),
                        reinterpret_cast<char*>(out->data() + (read_range.begin - begin)));
  return read.ok() ? read : CheckpointShardError(folder_, read);
}

absl::Status RankCheckpointReader::ReadAll() {
  params.resize(manifest_.units_size());
  states.resize(manifest_.units_size());
  for (int s = 0; s < manifest_.files_size(); ++s) {
    ASSIGN_OR_RETURN(const CheckpointShard shard, OpenCheckpointShard(folder_, manifest_.files(s)));
    RETURN_IF_ERROR(CheckShardAuthor(folder_, manifest_, shard));
    for (int u = 0; s == 0 && u < manifest_.units_size(); ++u) {
      const int64_t numel = manifest_.units(u).numel();
      if (numel == 0) continue;
      // This plan's shard of the unit, as FSDP cuts it: padded to a multiple of its group.
      const int64_t shard_numel = PaddedNumel(numel, plan_.shard_size) / plan_.shard_size;
      params[u].assign(shard_numel, 0.0f);
      ASSIGN_OR_RETURN(const std::vector<std::string> names, StateNames(shard, u));
      for (const std::string& state : names) {
        states[u][state].assign(shard_numel, 0.0f);
      }
    }
    RETURN_IF_ERROR(CheckEntries(shard));
    for (int u = 0; u < manifest_.units_size(); ++u) {
      if (manifest_.units(u).numel() == 0) continue;
      const int64_t begin = plan_.shard_rank * static_cast<int64_t>(params[u].size());
      RETURN_IF_ERROR(Copy(shard, s, u, "param", begin, &params[u]));
      for (auto& [state, values] : states[u]) {
        RETURN_IF_ERROR(Copy(shard, s, u, state, begin, &values));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& folder, const v1::JobSpec& spec,
                                                const ShardingPlan& plan) {
  LoadedCheckpoint loaded;
  loaded.folder = folder;
  ASSIGN_OR_RETURN(loaded.manifest, ReadManifest(folder));
  ASSIGN_OR_RETURN(const FlatLayout layout, BuildFlatLayout(spec.model(), spec.wrap()));
  RETURN_IF_ERROR(CheckCheckpointFits(folder, loaded.manifest, spec, layout));
  if (loaded.manifest.optimizer_steps() < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': its manifest says ",
                                            loaded.manifest.optimizer_steps(), " optimizer steps"));
  }
  // Optimizer state carries over only to an optimizer of the same kind (else not read).
  const bool same_optimizer = loaded.manifest.optimizer() == OptimizerKind(spec.optimizer());
  RankCheckpointReader reader(
      folder, loaded.manifest, plan,
      same_optimizer ? Optimizer::StateNames(spec.optimizer()) : std::vector<std::string>());
  RETURN_IF_ERROR(reader.ReadAll());
  loaded.params = std::move(reader.params);
  loaded.optimizer_state = std::move(reader.states);
  return loaded;
}

}  // namespace shardwise::fsdp
