#include "common/path_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/printable_text.h"
#include "common/status_macros.h"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

constexpr char kMissingInputUrl[] = "type.shardwise.dev/missing-input";

// The spec's error for an input it names that cannot be read (INVALID_ARGUMENT); marked
// for IsMissingInput when it is `missing` (not there, as this process sees it).
absl::Status NoReadableFile(const std::string& field, const std::string& path, bool missing) {
  absl::Status status = absl::InvalidArgumentError(
      absl::StrCat(field, ": '", path, "': no readable file at this path"));
  return missing ? MarkMissingInput(std::move(status)) : status;
}

// `path` with every symlink resolved; NOT_FOUND if it does not exist.
absl::Status HostCannotTell(const std::string& path, int error) {
  return absl::UnavailableError(absl::StrCat("'", path,
                                             "' cannot be looked up now: ", std::strerror(error),
                                             " (this host's storage or process, not the path)"));
}

// NOT_FOUND when `path` does not exist; UNAVAILABLE when the host could not tell now
// (IsTransientFileError: an I/O error, a stale NFS handle, no descriptor left).
absl::StatusOr<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    if (IsTransientFileError(errno)) return HostCannotTell(path, errno);
    return absl::NotFoundError(absl::StrCat("'", path, "' does not exist"));
  }
  return std::string(resolved);
}

// `path` resolved, when it is a folder that exists.
absl::StatusOr<std::string> ExistingFolder(const std::string& path) {
  ASSIGN_OR_RETURN(std::string real, RealPath(path));
  struct stat info;
  if (::stat(real.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::NotFoundError(absl::StrCat("'", path, "' is not a folder"));
  }
  return real;
}

// Whether canonical `path` is `root` or lies under it.
bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

bool UnderAny(const std::string& path, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (IsUnder(path, root)) return true;
  }
  return false;
}

std::string RootsText(const std::vector<std::string>& roots, const std::string& source) {
  if (roots.empty()) return absl::StrCat("no folder is allowed (", source, ")");
  return absl::StrCat("allowed: ", absl::StrJoin(roots, ", "), " (", source, ")");
}

// The canonical form of a path that may not exist yet: its longest existing ancestor
// with symlinks resolved, then the rest. `*existing` is that ancestor.
absl::StatusOr<std::string> CanonicalOutput(const std::string& absolute, std::string* existing) {
  fs::path prefix = fs::path(absolute);
  fs::path rest;
  while (true) {
    auto real = RealPath(prefix.string());
    if (real.ok()) {
      *existing = *real;
      return (rest.empty() ? fs::path(*real) : fs::path(*real) / rest).lexically_normal().string();
    }
    // A path this host cannot look up now is not one that does not exist.
    if (!absl::IsNotFound(real.status())) return real.status();
    if (!prefix.has_parent_path() || prefix.parent_path() == prefix) {
      return absl::NotFoundError(absl::StrCat("no folder of '", absolute, "' exists"));
    }
    rest = rest.empty() ? prefix.filename() : prefix.filename() / rest;
    prefix = prefix.parent_path();
  }
}

}  // namespace

std::string LexicallyNormal(const std::string& path, const std::string& cwd) {
  fs::path absolute = fs::path(path).is_absolute() ? fs::path(path) : fs::path(cwd) / path;
  std::string normal = absolute.lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

void PathPolicy::Roots::Add(const std::string& root, const std::string& real) {
  as_given.push_back(root);
  resolved.push_back(real);
}

absl::StatusOr<PathPolicy> PathPolicy::Create(const std::vector<std::string>& input_roots,
                                              const std::vector<std::string>& output_roots,
                                              const std::string& cwd) {
  PathPolicy policy;
  for (auto [given, kept] : {std::pair{&input_roots, &policy.input_.front()},
                             std::pair{&output_roots, &policy.output_.front()}}) {
    for (const std::string& root : *given) {
      if (root.empty()) continue;
      const std::string normal = LexicallyNormal(root, cwd);
      auto real = ExistingFolder(normal);
      if (!real.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("allowed path '", root, "' is not a folder that exists"));
      }
      kept->Add(normal, *real);
    }
  }
  return policy;
}

// On a worker, a root its file system lacks stays as written: nothing resolves under it.
PathPolicy PathPolicy::FromProto(const v1::PathPolicy& proto) {
  PathPolicy policy;
  for (auto [given, kept] : {std::pair{&proto.input_roots(), &policy.input_.front()},
                             std::pair{&proto.output_roots(), &policy.output_.front()}}) {
    for (const std::string& root : *given) kept->Add(root, RealPath(root).value_or(root));
  }
  return proto.has_submitter() ? policy.Narrowed(proto.submitter()) : policy;
}

v1::WorkerFolders PathPolicy::Folders() const {
  v1::WorkerFolders folders;
  for (auto [kept, listed] : {std::pair{&input_.front(), folders.mutable_input_roots()},
                              std::pair{&output_.front(), folders.mutable_output_roots()}}) {
    for (size_t i = 0; i < kept->as_given.size(); ++i) {
      listed->Add()->assign(kept->as_given[i]);
      if (kept->resolved[i] != kept->as_given[i]) listed->Add()->assign(kept->resolved[i]);
    }
  }
  return folders;
}

v1::PathPolicy PathPolicy::ToProto() const {
  v1::PathPolicy proto;
  for (const std::string& root : input_roots()) proto.add_input_roots(root);
  for (const std::string& root : output_roots()) proto.add_output_roots(root);
  if (narrowed()) *proto.mutable_submitter() = submitter_;
  return proto;
}

bool PathPolicy::narrowed() const {
  return std::any_of(input_.begin(), input_.end(),
                     [](const Roots& roots) { return roots.owner == Owner::kSubmitter; });
}

v1::SubmitterRoots PathPolicy::RootsOf(const std::string& principal,
                                       const PrincipalPaths& paths) const {
  v1::SubmitterRoots roots;
  roots.set_principal(principal);
  for (const std::string& root : paths.input.value_or(input_roots())) {
    roots.add_input_roots(LexicallyNormal(root, "/"));
  }
  for (const std::string& root : paths.output.value_or(output_roots())) {
    roots.add_output_roots(LexicallyNormal(root, "/"));
  }
  return roots;
}

PathPolicy PathPolicy::Narrowed(const v1::SubmitterRoots& roots) const {
  PathPolicy narrowed = *this;
  narrowed.submitter_ = roots;
  for (auto [given, layers] : {std::pair{&roots.input_roots(), &narrowed.input_},
                               std::pair{&roots.output_roots(), &narrowed.output_}}) {
    // An earlier submitter's layer is replaced.
    layers->erase(std::remove_if(layers->begin(), layers->end(),
                                 [](const Roots& r) { return r.owner == Owner::kSubmitter; }),
                  layers->end());
    Roots* kept = &layers->emplace_back();
    kept->owner = Owner::kSubmitter;
    for (const std::string& root : *given) {
      // A folder yet to be made (a principal's first checkpoints) resolves as an output
      // does: its nearest existing folder's links resolved, then the rest as written.
      std::string existing;
      kept->Add(root, CanonicalOutput(root, &existing).value_or(root));
    }
  }
  return narrowed;
}

PathPolicy PathPolicy::Within(const PathPolicy& ceiling) const {
  PathPolicy bounded = *this;
  for (auto [from, to] : {std::pair{&ceiling.input_.front(), &bounded.input_},
                          std::pair{&ceiling.output_.front(), &bounded.output_}}) {
    to->push_back(*from);
    to->back().owner = Owner::kWorker;
  }
  return bounded;
}

absl::Status PathPolicy::Outside(const std::string& field, const std::string& path,
                                 const std::string& shown, const Roots& roots, bool output) const {
  const char* verb = output ? "write" : "read";
  const char* flag = output ? "--allowed_output_paths" : "--allowed_input_paths";
  const std::string& principal = submitter_.principal();
  std::string folders, source;
  switch (roots.owner) {
    case Owner::kCoordinator:
      folders = absl::StrCat("the folders this coordinator lets jobs ", verb);
      source = flag;
      break;
    case Owner::kSubmitter:
      folders = absl::StrCat("the folders the tokens file lets ", principal, "'s jobs ", verb);
      source = absl::StrCat(output ? "output_paths" : "input_paths", " of ", principal);
      break;
    case Owner::kWorker:
      folders = absl::StrCat("the folders this worker lets jobs ", verb);
      source = absl::StrCat("the worker's ", flag);
      break;
  }
  return absl::PermissionDeniedError(
      absl::StrCat(field, ": '", path, "'", shown != path ? absl::StrCat(" (", shown, ")") : "",
                   " is outside ", folders, "; ", RootsText(roots.as_given, source)));
}

absl::Status PathPolicy::CheckInside(const std::string& field, const std::string& path,
                                     const std::string& form_of_path, Form form,
                                     bool output) const {
  const std::vector<Roots>& layers = output ? output_ : input_;
  for (const Roots& roots : layers) {
    const bool inside = UnderAny(form_of_path, roots.resolved) ||
                        (form == Form::kLexical && UnderAny(form_of_path, roots.as_given));
    if (!inside) return Outside(field, path, form_of_path, roots, output);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PathPolicy::CheckInput(const std::string& field,
                                                   const std::string& path, Kind kind) const {
  const std::string absolute = LexicallyNormal(path, "/");
  RETURN_IF_ERROR(CheckAbsolutePath(field, path));
  // The lexical form first: '..' cannot climb out of a root even where no link is.
  RETURN_IF_ERROR(CheckInside(field, path, absolute, Form::kLexical, /*output=*/false));
  auto canonical = RealPath(absolute);
  if (absl::IsUnavailable(canonical.status())) {
    return absl::UnavailableError(absl::StrCat(field, ": ", canonical.status().message()));
  }
  // RealPath's only other error, NOT_FOUND: not there, or not reachable by this process
  // (a folder's permissions, a link loop); either may be one worker's host's alone.
  if (!canonical.ok()) return NoReadableFile(field, path, /*missing=*/true);
  RETURN_IF_ERROR(CheckInside(field, path, *canonical, Form::kResolved, /*output=*/false));
  struct stat info;
  if (::stat(canonical->c_str(), &info) != 0) {
    if (IsTransientFileError(errno)) {
      return absl::UnavailableError(
          absl::StrCat(field, ": ", HostCannotTell(path, errno).message()));
    }
    return NoReadableFile(field, path, /*missing=*/errno == ENOENT);  // ENOENT: removed since
  }
  if (kind == Kind::kFile && !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", path, "' is not a regular file"));
  }
  if (kind == Kind::kFolder && !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", path, "' is not a folder"));
  }
  return *canonical;
}

absl::StatusOr<std::string> PathPolicy::CheckOutput(const std::string& field,
                                                    const std::string& path, Kind kind,
                                                    bool overwrite) const {
  RETURN_IF_ERROR(CheckAbsolutePath(field, path));
  const std::string absolute = LexicallyNormal(path, "/");
  RETURN_IF_ERROR(CheckInside(field, path, absolute, Form::kLexical, /*output=*/true));
  std::string existing;
  ASSIGN_OR_RETURN(const std::string canonical, CanonicalOutput(absolute, &existing));
  RETURN_IF_ERROR(CheckInside(field, path, canonical, Form::kResolved, /*output=*/true));
  struct stat info;
  if (::stat(existing.c_str(), &info) != 0) {
    // Removed since it was resolved, or this host's storage failing: asked again, the
    // next attempt may find it.
    return absl::UnavailableError(
        absl::StrCat(field, ": '", existing, "' vanished: ", std::strerror(errno)));
  }
  const bool whole_path_exists = existing == canonical;
  if (whole_path_exists && kind == Kind::kFile) {
    if (!S_ISREG(info.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", path, "' exists and is not a regular file"));
    }
    if (!overwrite) {
      return absl::AlreadyExistsError(
          absl::StrCat(field, ": '", path,
                       "' exists already; a job never replaces a file it did not "
                       "create unless its spec says output.overwrite: true"));
    }
  }
  if (whole_path_exists && kind == Kind::kFolder && !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", path, "' is not a folder"));
  }
  // Where the first thing will be created: the nearest existing folder (for an existing
  // file, the folder holding it).
  const std::string parent = whole_path_exists && kind == Kind::kFile
                                 ? fs::path(canonical).parent_path().string()
                                 : existing;
  if (::stat(parent.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", parent, "' is in the way and is not a folder"));
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    // A file system this host mounted read-only (after disk errors, or missing its
    // mount), or failing, is the host's trouble, which another host may not have: only a
    // folder's own permissions are the job's.
    if (errno == EROFS || IsTransientFileError(errno)) {
      return absl::UnavailableError(absl::StrCat(
          field, ": '", parent, "' cannot be written on this host now: ", std::strerror(errno)));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": '", parent, "' cannot be written (by this process)"));
  }
  return canonical;
}

absl::StatusOr<std::string> PathPolicy::CheckLexically(const std::string& field,
                                                       const std::string& path, bool output) const {
  RETURN_IF_ERROR(CheckAbsolutePath(field, path));
  const std::string absolute = LexicallyNormal(path, "/");
  RETURN_IF_ERROR(CheckInside(field, path, absolute, Form::kLexical, output));
  return absolute;
}

absl::Status ForEachPathField(
    v1::JobSpec* spec,
    const std::function<absl::Status(const PathField& field, std::string* path)>& visit) {
  using Kind = PathPolicy::Kind;
  auto each = [&](const char* name, std::string* path, Kind kind, bool output) {
    if (path->empty()) return absl::OkStatus();
    return visit(PathField{name, kind, output}, path);
  };
  v1::DataSpec* data = spec->mutable_data();
  if (data->has_safetensors_path()) {
    RETURN_IF_ERROR(
        each("job.data.safetensors_path", data->mutable_safetensors_path(), Kind::kFile, false));
  }
  if (data->has_tokens()) {
    v1::TokenData* tokens = data->mutable_tokens();
    RETURN_IF_ERROR(
        each("job.data.tokens.train_path", tokens->mutable_train_path(), Kind::kFile, false));
    RETURN_IF_ERROR(
        each("job.data.tokens.val_path", tokens->mutable_val_path(), Kind::kFile, false));
    RETURN_IF_ERROR(
        each("job.data.tokens.tokenizer", tokens->mutable_tokenizer(), Kind::kFolder, false));
  }
  v1::InitSpec* init = spec->mutable_init();
  if (init->has_safetensors_path()) {
    RETURN_IF_ERROR(
        each("job.init.safetensors_path", init->mutable_safetensors_path(), Kind::kFile, false));
  }
  if (init->has_checkpoint_dir()) {
    RETURN_IF_ERROR(
        each("job.init.checkpoint_dir", init->mutable_checkpoint_dir(), Kind::kFolder, false));
  }
  if (init->has_huggingface()) {
    RETURN_IF_ERROR(each("job.init.huggingface.dir", init->mutable_huggingface()->mutable_dir(),
                         Kind::kFolder, false));
  }
  v1::OutputSpec* output = spec->mutable_output();
  RETURN_IF_ERROR(
      each("job.output.final_model_path", output->mutable_final_model_path(), Kind::kFile, true));
  RETURN_IF_ERROR(
      each("job.output.huggingface_dir", output->mutable_huggingface_dir(), Kind::kFolder, true));
  return each("job.output.checkpoint_dir", output->mutable_checkpoint_dir(), Kind::kFolder, true);
}

JobPaths PathsOf(const v1::JobSpec& spec) {
  v1::JobSpec copy = spec;  // ForEachPathField may rewrite; this visit does not
  JobPaths paths;
  (void)ForEachPathField(&copy, [&](const PathField& field, std::string* path) {
    (field.output ? paths.outputs : paths.inputs).push_back({field.name, *path});
    return absl::OkStatus();
  });
  return paths;
}

const JobPaths::Path* FirstOutside(const v1::WorkerFolders& folders, const JobPaths& paths) {
  for (auto [each, roots] : {std::pair{&paths.inputs, &folders.input_roots()},
                             std::pair{&paths.outputs, &folders.output_roots()}}) {
    for (const JobPaths::Path& path : *each) {
      if (std::none_of(roots->begin(), roots->end(),
                       [&](const std::string& root) { return IsUnder(path.path, root); })) {
        return &path;
      }
    }
  }
  return nullptr;
}

absl::Status CheckAbsolutePath(const std::string& field, const std::string& path) {
  if (fs::path(path).is_absolute()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": '", path, "' is not an absolute path"));
}

absl::Status CheckPathText(const std::string& field, const std::string& path) {
  auto length = CountPrintableCharacters(path);
  if (length.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": the path '", ShownValue(path), "' ", length.status().message()));
}

absl::Status ApplyPathPolicy(const PathPolicy& policy, PathCheck check, v1::JobSpec* spec) {
  const bool on_disk = check == PathCheck::kOnDisk;
  // The checkpoint folder is the job's own: an attempt that resumes writes it again.
  const bool overwrite_model = spec->output().overwrite();
  return ForEachPathField(spec, [&](const PathField& field, std::string* path) -> absl::Status {
    // First: the file system reads a path only up to a NUL, so a path checked as it is
    // would be another path than the one written in the spec.
    RETURN_IF_ERROR(CheckPathText(field.name, *path));
    const bool overwrite = field.kind == PathPolicy::Kind::kFolder || overwrite_model;
    absl::StatusOr<std::string> checked =
        !on_disk       ? policy.CheckLexically(field.name, *path, field.output)
        : field.output ? policy.CheckOutput(field.name, *path, field.kind, overwrite)
                       : policy.CheckInput(field.name, *path, field.kind);
    if (!checked.ok()) return checked.status();
    *path = *std::move(checked);
    return absl::OkStatus();
  });
}

bool IsMissingInput(const absl::Status& status) {
  return status.GetPayload(kMissingInputUrl).has_value();
}

absl::Status MarkMissingInput(absl::Status status) {
  if (!status.ok()) status.SetPayload(kMissingInputUrl, absl::Cord("1"));
  return status;
}

}  // namespace shardwise
