#ifndef SHARDWISE_COMMON_PATH_POLICY_H_
#define SHARDWISE_COMMON_PATH_POLICY_H_

// Where a job may read and write. A job spec names files and folders that every worker
// opens with the worker's own permissions; without a policy, a spec could make workers
// read or replace anything they can reach. The coordinator holds the allowed roots
// (`--allowed_input_paths`, `--allowed_output_paths`), checks every path field of a spec
// at submission and replaces it with its canonical form, and sends the roots with each
// assignment so that workers check again, on their own file system, before they open
// anything. A principal's entry in the tokens file may keep its jobs to folders of their
// own inside those (`input_paths`, `output_paths`: server/client_auth.h); a job's paths
// must then lie inside both, on the coordinator and on every worker.
//
// Canonical: absolute, normalised, and with every symlink of the part that exists
// resolved, so a path cannot leave its root through `..` or through a link. An input must
// exist (a regular file, or a folder where a folder is expected); an output's nearest
// existing folder must be writable, and a final model that exists already is refused
// unless the spec allows overwriting it.
//
// Thread-safety: a PathPolicy is immutable once created.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/untrusted_file.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

// The most roots a worker's flag may name per side (--allowed_input_paths,
// --allowed_output_paths), so that what it advertises stays bounded.
inline constexpr int kMaxWorkerRoots = 32;

class PathPolicy {
 public:
  // `input_roots` and `output_roots` are folders, made absolute against `cwd`; each must
  // exist as a folder (INVALID_ARGUMENT naming it otherwise). Empty lists allow nothing.
  static absl::StatusOr<PathPolicy> Create(const std::vector<std::string>& input_roots,
                                           const std::vector<std::string>& output_roots,
                                           const std::string& cwd);
  // The roots an assignment carries, already canonical (a worker checks against them).
  static PathPolicy FromProto(const v1::PathPolicy& proto);
  v1::PathPolicy ToProto() const;

  // What a principal's tokens-file entry says of its folders; a side it leaves out is
  // unset (the coordinator's roots alone).
  struct PrincipalPaths {
    std::optional<std::vector<std::string>> input;
    std::optional<std::vector<std::string>> output;
    bool any() const { return input.has_value() || output.has_value(); }
  };
  // The roots `principal`'s jobs are kept to: `paths`, absolute and normal, with a side
  // left out filled with this policy's own roots (so that it narrows nothing there).
  v1::SubmitterRoots RootsOf(const std::string& principal, const PrincipalPaths& paths) const;
  // This policy narrowed to a submitter's `roots` as well: each path must then lie inside
  // one of this policy's roots and one of the submitter's. The submitter's need not exist
  // yet: each is resolved as an output is (its nearest existing folder's links resolved).
  PathPolicy Narrowed(const v1::SubmitterRoots& roots) const;
  // This policy bounded by a worker's own roots as well (its --allowed_input_paths and
  // --allowed_output_paths, `ceiling`'s roots): what a coordinator sends cannot take a
  // job outside the folders the worker's operator allows.
  PathPolicy Within(const PathPolicy& ceiling) const;

  enum class Kind { kFile, kFolder };

  // The canonical form of input `path` (spec field `field`). PERMISSION_DENIED naming the
  // field and the value when it lies outside every input root (also through `..` or a
  // symlink); INVALID_ARGUMENT when it does not exist, is not a regular file (kFile) or
  // not a folder (kFolder).
  absl::StatusOr<std::string> CheckInput(const std::string& field, const std::string& path,
                                         Kind kind) const;
  // The canonical form of output `path`. PERMISSION_DENIED outside every output root or
  // when its nearest existing folder is not writable; ALREADY_EXISTS for a file (kFile)
  // that exists, unless `overwrite`; INVALID_ARGUMENT for a folder where a file is wanted
  // or the reverse.
  absl::StatusOr<std::string> CheckOutput(const std::string& field, const std::string& path,
                                          Kind kind, bool overwrite) const;
  // Only the lexical checks of CheckInput / CheckOutput: absolute, normal, under a root.
  absl::StatusOr<std::string> CheckLexically(const std::string& field, const std::string& path,
                                             bool output) const;

  // A worker's own folders as it advertises them to its coordinator: this policy's roots,
  // each as given and, where it differs, with its links resolved (so at most twice
  // kMaxWorkerRoots per side).
  v1::WorkerFolders Folders() const;

  const std::vector<std::string>& input_roots() const { return input_.front().as_given; }
  const std::vector<std::string>& output_roots() const { return output_.front().as_given; }

 private:
  // Whose roots a layer holds, which an error names.
  enum class Owner { kCoordinator, kSubmitter, kWorker };
  // Each root twice: as given (absolute, normal), which a path as written is checked
  // against, and with its symlinks resolved, which a canonical path is checked against.
  struct Roots {
    std::vector<std::string> as_given;
    std::vector<std::string> resolved;
    Owner owner = Owner::kCoordinator;
    void Add(const std::string& root, const std::string& real);
  };
  // PERMISSION_DENIED, naming the layer, unless `form_of_path` lies inside a root of
  // each layer of the outputs (`output`) or of the inputs: a path as written is compared
  // with the roots as given and resolved (kLexical), a canonical one with the resolved
  // roots only (kResolved).
  enum class Form { kLexical, kResolved };
  absl::Status CheckInside(const std::string& field, const std::string& path,
                           const std::string& form_of_path, Form form, bool output) const;

  // PERMISSION_DENIED: `path` (spelled `shown` once absolute or canonical) lies outside
  // `roots`, named as their owner's.
  absl::Status Outside(const std::string& field, const std::string& path, const std::string& shown,
                       const Roots& roots, bool output) const;
  // Whether a layer of the submitter's roots is set.
  bool narrowed() const;

  // Layers a path must lie inside each of: [0] the coordinator's roots, then where set the
  // submitter's (submitter_.principal() names whose) and the worker's.
  std::vector<Roots> input_ = std::vector<Roots>(1);
  std::vector<Roots> output_ = std::vector<Roots>(1);
  v1::SubmitterRoots submitter_;
};

// Checks every path field of `spec` against `policy` and writes back its canonical form:
// the inputs (data.safetensors_path, data.tokens.train_path, val_path and tokenizer,
// init.safetensors_path, init.checkpoint_dir, init.huggingface.dir) and the outputs
// (output.final_model_path, output.huggingface_dir, output.checkpoint_dir, which also
// serves as an input when an attempt resumes).
// kOnDisk checks as above; kLexical, for a coordinator that cannot see the workers'
// files (--check_paths=false), only makes the paths absolute and normal and checks them
// against the roots as written (the workers check on disk).
enum class PathCheck { kOnDisk, kLexical };
absl::Status ApplyPathPolicy(const PathPolicy& policy, PathCheck check, v1::JobSpec* spec);

// Whether `status` is kOnDisk's finding that an input the spec names does not exist
// (INVALID_ARGUMENT, marked so): on a worker, possibly its own host's lack (a volume not
// mounted there) while other hosts have the file, which the coordinator tells apart
// (server/missing_inputs.h).
bool IsMissingInput(const absl::Status& status);
// `status` marked so (IsMissingInput): a check of its own, on a worker, that found an input
// of the job's not there on its host.
absl::Status MarkMissingInput(absl::Status status);

// How a worker opens the paths ApplyPathPolicy(kOnDisk) left in its spec, and the files
// inside the folders they name: with no link at any component (common/untrusted_file.h).
// Each was canonical when checked, so a link found at the opening was put there since: a
// folder of the path swapped for a link out of the roots between the check and the read.
inline constexpr Links kCheckedPathLinks = Links::kRefuseAll;

// Calls `visit` with every path field of `spec` that is set (its name as errors give it,
// "job.data.tokens.train_path", whether it names a file or a folder, whether the job
// writes it) and the path, which `visit` may rewrite; stops at the first error.
struct PathField {
  const char* name;
  PathPolicy::Kind kind;
  bool output;
};
absl::Status ForEachPathField(
    v1::JobSpec* spec,
    const std::function<absl::Status(const PathField& field, std::string* path)>& visit);

// What a spec reads and what it writes: its path fields (ForEachPathField) that are set.
struct JobPaths {
  struct Path {
    const char* field;  // "job.data.tokens.train_path"
    std::string path;
  };
  std::vector<Path> inputs, outputs;
};
JobPaths PathsOf(const v1::JobSpec& spec);

// The first path of `paths` a worker advertising `folders` would refuse: an input under
// none of its input roots, or an output under none of its output roots; null when it
// would take them all. Compared as written (absolute and normal, as the coordinator's
// check leaves them): a prediction of what the worker decides on its own file system,
// where it checks again.
const JobPaths::Path* FirstOutside(const v1::WorkerFolders& folders, const JobPaths& paths);

// OK when `path` is printable text (common/printable_text.h): no NUL, which would cut it
// short where the system reads it, and no control character; else INVALID_ARGUMENT
// naming `field` and showing the path escaped. ApplyPathPolicy checks every path so first.
absl::Status CheckPathText(const std::string& field, const std::string& path);

// OK when `path` is absolute; else INVALID_ARGUMENT "FIELD: 'PATH' is not an absolute path".
absl::Status CheckAbsolutePath(const std::string& field, const std::string& path);

// `path` made absolute against `cwd` and normalised lexically ("." and ".." removed); no
// file system access.
std::string LexicallyNormal(const std::string& path, const std::string& cwd);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_PATH_POLICY_H_
