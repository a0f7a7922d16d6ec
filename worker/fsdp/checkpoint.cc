#include "worker/fsdp/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/safe_write.h"
#include "common/status_macros.h"
#include "common/untrusted_file.h"
#include "contracts/safetensors.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace shardwise::fsdp {
namespace {

namespace fs = std::filesystem;
constexpr char kManifest[] = "manifest.json";
// A manifest lists the model's units: far below this.
constexpr uint64_t kMaxManifestBytes = uint64_t{16} << 20;

// Files inside a checkpoint folder are read as untrusted (common/untrusted_file.h): the
// path policy checked the folder a spec names, not the names inside it, so neither a
// step folder nor a file in it is read through a link (one planted there could lead to
// another job's checkpoint, or be swapped in after a check), nor does a FIFO block.
// Each is opened beneath the checkpoint folder, component by component.
absl::StatusOr<std::string> ReadStepFile(const std::string& step_folder, const std::string& name,
                                         uint64_t max_bytes) {
  const fs::path folder(step_folder);
  ASSIGN_OR_RETURN(
      UntrustedFile file,
      UntrustedFile::OpenBeneath(folder.parent_path().string(),
                                 absl::StrCat(folder.filename().string(), "/", name), max_bytes));
  return file.ReadAll();
}

// The manifest of step folder `folder`: NOT_FOUND (none yet: the manifest is written
// last), INVALID_ARGUMENT (a link, not a folder or not a regular file), DATA_LOSS (not
// a manifest).
absl::StatusOr<v1::CheckpointManifest> ReadManifestFile(const std::string& folder) {
  ASSIGN_OR_RETURN(const std::string json, ReadStepFile(folder, kManifest, kMaxManifestBytes));
  v1::CheckpointManifest manifest;
  if (!google::protobuf::util::JsonStringToMessage(json, &manifest).ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': unreadable manifest"));
  }
  return manifest;
}

std::string ShardFile(int shard_rank) {
  return absl::StrFormat("rank-%05d.safetensors", shard_rank);
}

std::string TensorName(int unit, const std::string& what) {
  return absl::StrCat("unit", unit, ".", what);
}

// The shard files' metadata key naming the attempt that wrote them.
constexpr char kAttemptKey[] = "shardwise.attempt";

std::string Superseded(const CheckpointAuthor& author, int32_t later, const std::string& where) {
  return absl::StrCat("attempt ", later, " of job ", author.job_id, " wrote ", where,
                      ": this attempt (", author.attempt,
                      ") was superseded (its worker lost the coordinator, which ran the job "
                      "again elsewhere) and writes no more checkpoints");
}

// The step folders of `dir`, by step (the names "step-N").
absl::StatusOr<std::map<int64_t, std::string>> StepFolders(const std::string& dir) {
  // The folder itself opened as the job's paths are (no link anywhere): one put in its
  // path since the check fails the attempt, rather than read as "no checkpoint".
  const absl::StatusOr<std::vector<std::string>> names = ListFolder(dir, Links::kRefuseAll);
  if (!names.ok() && !absl::IsNotFound(names.status())) return names.status();
  std::map<int64_t, std::string> steps;
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>()) {
    int64_t step = 0;
    if (!absl::StartsWith(name, "step-") || !absl::SimpleAtoi(name.substr(5), &step)) continue;
    steps[step] = absl::StrCat(dir, "/", name);
  }
  return steps;
}

// FAILED_PRECONDITION when a step of `dir` was written by a later attempt of the job.
absl::Status CheckNotSuperseded(const std::string& dir, const CheckpointAuthor& author) {
  ASSIGN_OR_RETURN(const auto steps, StepFolders(dir));
  for (const auto& [step, folder] : steps) {
    const absl::StatusOr<v1::CheckpointManifest> manifest = ReadManifestFile(folder);
    if (absl::IsUnavailable(manifest.status())) return manifest.status();
    if (manifest.ok() && manifest->job_id() == author.job_id &&
        manifest->attempt() > author.attempt) {
      return absl::FailedPreconditionError(Superseded(author, manifest->attempt(), folder));
    }
  }
  return absl::OkStatus();
}

// A shard of `folder` that could not be read: a link or a file that is not regular stays
// INVALID_ARGUMENT, this host's trouble UNAVAILABLE (not the job's to repeat); the rest is
// damage (DATA_LOSS).
absl::Status ShardReadError(const std::string& folder, const absl::Status& read) {
  const absl::StatusCode code = absl::IsInvalidArgument(read) || absl::IsUnavailable(read)
                                    ? read.code()
                                    : absl::StatusCode::kDataLoss;
  return absl::Status(code, absl::StrCat("checkpoint '", folder, "': ", read.message()));
}

// A step's shard files, each opened once and its header read: the tensors read at the
// header's offsets come from the file whose header was checked. Loading reads only the
// ranges a rank needs (every unit's parameters, its own shard of the optimizer state),
// never a whole file: a rank's host memory holds the model and its own optimizer shard,
// not the whole optimizer state of every rank.
class ShardFiles {
 public:
  // The files the manifest lists, opened beneath the checkpoint folder; a file that
  // cannot be read keeps its error as ShardReadError says. CheckEntries, StateNames and
  // Read take a manifest that CheckManifest accepted.
  static absl::StatusOr<ShardFiles> Open(const std::string& folder,
                                         const v1::CheckpointManifest& manifest);

  // OK unless a file names another attempt than the manifest (DATA_LOSS). A manifest
  // without an attempt (attempt 0), or a shard without one, was written by a release that
  // did not record it (a job's workers may be of two releases during an upgrade) and is
  // taken as it is.
  absl::Status CheckAttempt() const;
  // OK if every file holds, for every unit with parameters, its parameters and the
  // optimizer states the first file holds for it, each as F32 [padded_numel / files]
  // (DATA_LOSS naming the first that does not).
  absl::Status CheckEntries() const;
  // The names of unit `u`'s optimizer states (as the first file holds them).
  std::vector<std::string> StateNames(int u) const;
  // Elements [begin, end) of unit `u`'s flat `what` (its parameters, or a state), from
  // the files that hold them; past the unit's numel (the padding) zeros.
  absl::StatusOr<std::vector<float>> Read(int u, const std::string& what, int64_t begin,
                                          int64_t end) const;

 private:
  struct File {
    std::string name;
    UntrustedFile file;
    SafetensorsIndex index;
  };
  ShardFiles(std::string folder, v1::CheckpointManifest manifest)
      : folder_(std::move(folder)), manifest_(std::move(manifest)) {}
  int64_t ShardNumel(int u) const {
    return manifest_.units(u).padded_numel() / manifest_.shard_group_size();
  }

  std::string folder_;
  v1::CheckpointManifest manifest_;
  std::vector<File> files_;
};

absl::StatusOr<ShardFiles> ShardFiles::Open(const std::string& folder,
                                            const v1::CheckpointManifest& manifest) {
  ShardFiles shards(folder, manifest);
  const fs::path step(folder);
  for (const std::string& name : manifest.files()) {
    const std::string path = absl::StrCat(folder, "/", name);
    absl::StatusOr<UntrustedFile> file = UntrustedFile::OpenBeneath(
        step.parent_path().string(), absl::StrCat(step.filename().string(), "/", name),
        kMaxSafetensorsFileBytes);
    absl::StatusOr<SafetensorsIndex> index =
        file.ok() ? ReadSafetensorsIndex(*file, path) : file.status();
    if (!index.ok()) return ShardReadError(folder, index.status());
    shards.files_.push_back({name, *std::move(file), *std::move(index)});
  }
  return shards;
}

absl::Status ShardFiles::CheckAttempt() const {
  if (manifest_.attempt() == 0) return absl::OkStatus();
  for (const File& shard : files_) {
    const auto attempt = shard.index.metadata.find(kAttemptKey);
    if (attempt != shard.index.metadata.end() &&
        attempt->second != absl::StrCat(manifest_.attempt())) {
      return absl::DataLossError(
          absl::StrCat("checkpoint '", folder_, "': ", shard.name, " was written by attempt ",
                       attempt->second, ", not by attempt ", manifest_.attempt(),
                       " whose manifest the step holds (two attempts of the job wrote here)"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ShardFiles::StateNames(int u) const {
  std::vector<std::string> names;
  const std::string prefix = TensorName(u, "");
  const auto& tensors = files_.front().index.tensors;
  for (auto it = tensors.lower_bound(prefix); it != tensors.end(); ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    const std::string state = it->first.substr(prefix.size());
    if (state != "param") names.push_back(state);
  }
  return names;
}

absl::Status ShardFiles::CheckEntries() const {
  for (int u = 0; u < manifest_.units_size(); ++u) {
    if (manifest_.units(u).numel() == 0) continue;
    std::vector<std::string> names = StateNames(u);
    names.push_back("param");
    for (const File& shard : files_) {
      for (const std::string& what : names) {
        const auto it = shard.index.tensors.find(TensorName(u, what));
        if (it == shard.index.tensors.end() || it->second.dtype != "F32" ||
            it->second.shape != std::vector<int64_t>{ShardNumel(u)}) {
          return absl::DataLossError(absl::StrCat("checkpoint '", folder_, "': ", shard.name,
                                                  " lacks ", TensorName(u, what), " as F32 [",
                                                  ShardNumel(u), "]"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ShardFiles::Read(int u, const std::string& what, int64_t begin,
                                                    int64_t end) const {
  std::vector<float> values(end - begin, 0.0f);
  const int64_t shard_numel = ShardNumel(u);
  const int64_t numel = std::min(end, manifest_.units(u).numel());
  for (int64_t at = begin; at < numel;) {
    // Element `at` lies in file at / shard_numel (CheckEntries: each holds shard_numel).
    const File& shard = files_[at / shard_numel];
    const int64_t offset = at % shard_numel;
    const int64_t count = std::min(numel - at, shard_numel - offset);
    const SafetensorsEntry& entry = shard.index.tensors.at(TensorName(u, what));
    const absl::Status read =
        shard.file.ReadAt(entry.begin + offset * sizeof(float), count * sizeof(float),
                          reinterpret_cast<char*>(&values[at - begin]));
    if (!read.ok()) return ShardReadError(folder_, read);
    at += count;
  }
  return values;
}

}  // namespace

std::string CheckpointFolder(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/step-%08d", dir, step);
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
  // A later attempt's step here already: not overwritten with this one's shard.
  if (const absl::StatusOr<v1::CheckpointManifest> there = ReadManifestFile(folder);
      there.ok() && there->job_id() == author.job_id && there->attempt() > author.attempt) {
    return absl::FailedPreconditionError(Superseded(author, there->attempt(), folder));
  }
  TensorMap tensors;
  for (int u = 0; u < model.num_units(); ++u) {
    if (model.shard_numel(u) == 0) continue;
    // Shards and optimizer state live on the model's device: copied out first.
    ASSIGN_OR_RETURN(std::vector<float> param, model.ShardToHost(u));
    tensors[TensorName(u, "param")] = F32Tensor({model.shard_numel(u)}, param.data());
    for (const auto& [name, buffer] : optimizer.SegmentState(u)) {
      std::vector<float> state(buffer->numel());
      RETURN_IF_ERROR(model.device()->CopyToHost(state.data(), buffer->data(), buffer->bytes()));
      tensors[TensorName(u, name)] = F32Tensor({model.shard_numel(u)}, state.data());
    }
  }
  return WriteSafetensors(absl::StrCat(folder, "/", ShardFile(plan.shard_rank)), tensors,
                          {{kAttemptKey, absl::StrCat(author.attempt)}});
}

absl::Status WriteCheckpointManifest(const std::string& dir, int64_t step,
                                     const CheckpointAuthor& author, const v1::JobSpec& spec,
                                     const FsdpModel& model, const Optimizer& optimizer,
                                     const v1::GradScalerState* scaler) {
  RETURN_IF_ERROR(CheckNotSuperseded(dir, author));
  v1::CheckpointManifest manifest;
  if (scaler != nullptr) *manifest.mutable_grad_scaler() = *scaler;
  manifest.set_job_id(author.job_id);
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
  for (int s = 0; s < model.plan().shard_size; ++s) manifest.add_files(ShardFile(s));
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(manifest, &json, options);
  // The job's own checkpoint: written again by an attempt that resumes before it.
  return WriteFileAtomically(absl::StrCat(CheckpointFolder(dir, step), "/", kManifest), json,
                             /*replace=*/true);
}

absl::StatusOr<std::string> FindLatestCheckpoint(const std::string& dir,
                                                 const std::string& job_id) {
  ASSIGN_OR_RETURN(const auto steps, StepFolders(dir));
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {  // newest first
    const auto& [step, folder] = *it;
    // Incomplete (the manifest is written last), not a checkpoint this job may read, or
    // not this folder's step, or mixed with another attempt's shards: passed over.
    // What this host could not read now is not passed over: the attempt would start
    // from an older step, or from its seed, for an NFS hiccup.
    const absl::StatusOr<v1::CheckpointManifest> manifest = ReadManifestFile(folder);
    if (absl::IsUnavailable(manifest.status())) return manifest.status();
    if (!manifest.ok() || manifest->step() != step) continue;
    if (!job_id.empty() && manifest->job_id() != job_id) continue;
    const absl::StatusOr<ShardFiles> files = ShardFiles::Open(folder, *manifest);
    const absl::Status shards = files.ok() ? files->CheckAttempt() : files.status();
    if (absl::IsUnavailable(shards)) return shards;
    if (!shards.ok()) continue;
    return folder;
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint in '", dir, "'",
                                          job_id.empty() ? "" : " for job " + job_id));
}

namespace {

absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& folder) {
  absl::StatusOr<v1::CheckpointManifest> manifest = ReadManifestFile(folder);
  if (absl::IsNotFound(manifest.status())) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': no manifest"));
  }
  return manifest;
}

// The manifest is of this job's model, names the shard files this writer names, and lists
// the layout's units with their sizes.
absl::Status CheckManifest(const std::string& folder, const v1::CheckpointManifest& manifest,
                           const v1::JobSpec& spec, const FlatLayout& layout) {
  using google::protobuf::util::MessageDifferencer;
  if (!MessageDifferencer::Equals(manifest.model(), spec.model()) ||
      !MessageDifferencer::Equals(manifest.wrap(), spec.wrap())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint '", folder, "' holds another model or wrap policy than job.model / job.wrap"));
  }
  // Only the names this writer gives its shard files are read, so a crafted manifest
  // cannot make a worker read files outside the folder.
  if (manifest.files_size() != manifest.shard_group_size() || manifest.shard_group_size() < 1) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': the manifest lists ",
                                            manifest.files_size(), " shard files for a shard ",
                                            "group of ", manifest.shard_group_size()));
  }
  for (int s = 0; s < manifest.files_size(); ++s) {
    if (manifest.files(s) != ShardFile(s)) {
      return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': shard file ", s,
                                              " is named '", manifest.files(s), "', expected '",
                                              ShardFile(s), "'"));
    }
  }
  if (manifest.units_size() != static_cast<int>(layout.units.size())) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': the manifest lists ",
                                            manifest.units_size(), " units, the model has ",
                                            layout.units.size()));
  }
  for (int u = 0; u < manifest.units_size(); ++u) {
    const int64_t numel = layout.units[u].numel;
    if (manifest.units(u).numel() != numel ||
        manifest.units(u).padded_numel() != PaddedNumel(numel, manifest.shard_group_size())) {
      return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': unit ", u,
                                              " is listed with ", manifest.units(u).numel(),
                                              " parameters, the model's has ", numel));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& folder, const v1::JobSpec& spec,
                                                const ShardingPlan& plan) {
  LoadedCheckpoint loaded;
  ASSIGN_OR_RETURN(loaded.manifest, ReadManifest(folder));
  const v1::CheckpointManifest& manifest = loaded.manifest;
  ASSIGN_OR_RETURN(const FlatLayout layout, BuildFlatLayout(spec.model(), spec.wrap()));
  RETURN_IF_ERROR(CheckManifest(folder, manifest, spec, layout));
  ASSIGN_OR_RETURN(const ShardFiles files, ShardFiles::Open(folder, manifest));
  RETURN_IF_ERROR(files.CheckAttempt());
  RETURN_IF_ERROR(files.CheckEntries());
  loaded.optimizer_state.resize(manifest.units_size());
  for (int u = 0; u < manifest.units_size(); ++u) {
    const int64_t numel = manifest.units(u).numel();
    if (numel == 0) continue;
    ASSIGN_OR_RETURN(const std::vector<float> params, files.Read(u, "param", 0, numel));
    AddUnitTensors(layout, u, params.data(), &loaded.model);
    // This plan's shard of the unit, as FSDP cuts it: padded to a multiple of its group.
    const int64_t shard_numel = PaddedNumel(numel, plan.shard_size) / plan.shard_size;
    const int64_t begin = plan.shard_rank * shard_numel;
    for (const std::string& state : files.StateNames(u)) {
      ASSIGN_OR_RETURN(loaded.optimizer_state[u][state],
                       files.Read(u, state, begin, begin + shard_numel));
    }
  }
  return loaded;
}

}  // namespace shardwise::fsdp
