#ifndef SHARDWISE_SERVER_CLIENT_AUTH_H_
#define SHARDWISE_SERVER_CLIENT_AUTH_H_

// Who a JobService caller is, and what it may do. Clients send a bearer token
// ("authorization: Bearer TOKEN"); the coordinator's tokens file (--tokens_file) maps
// each token's SHA-256, never the token itself, to a principal and a role:
//
//   tokens:
//     - principal: alice
//       role: submitter     # viewer, submitter, admin or worker
//       sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//       input_paths: [/data/shared, /data/alice]   # optional: see below
//       output_paths: [/checkpoints/alice]         # optional
//     - principal: node7
//       role: worker
//       sha256: ...
//       worker_names: [node7-*]    # optional: the names this worker token may register
//
// input_paths and output_paths (a submitter's or an admin's entry) keep the principal's
// jobs to those folders, inside the coordinator's own (--allowed_input_paths,
// --allowed_output_paths; common/path_policy.h): a job's paths must lie in both, and its
// workers check both. Without them, the coordinator's roots alone. Each entry of one
// principal gives the same folders.
//
// `shardwise token create --principal alice --role submitter` makes a token and the
// entry. The file is read again when it changes (a bad edit keeps the previous table and
// is logged), so tokens are added and revoked without a restart.
//
//   viewer     get, list and watch jobs, timelines and workers
//   submitter  a viewer's calls; submit jobs; cancel, change the hook of and scale its own
//              jobs
//   admin      everything, every job
//   worker     register a worker daemon and open its session (WorkerService), nothing
//              else: the token worker daemons present (--token_file) where the
//              coordinator asks no certificate of them (no --worker_ca)
//
// worker_names (a worker's entry only) bind a worker token to the names it may register
// and open sessions under: each a name, or a prefix ending in '*' (common/worker_name.h).
// Without them a worker token registers any name: one token serves a whole pool. Keys an
// entry does not take are refused, so that a misspelt one binds nothing in silence.
//
// Thread-safety: all methods may be called from any thread.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/path_policy.h"
#include "grpcpp/server_context.h"

namespace YAML {
class Node;
}

namespace shardwise {

// Ordered for the client calls: a worker may make none of them.
enum class Role { kWorker = 0, kViewer = 1, kSubmitter = 2, kAdmin = 3 };
const char* RoleName(Role role);

struct Principal {
  std::string name;  // empty: anonymous (the coordinator authenticates no one)
  Role role = Role::kAdmin;
  PathPolicy::PrincipalPaths paths;  // its entry's input_paths and output_paths, if any
  // A worker token's entry's worker_names (common/worker_name.h), if any: the names it
  // may register under. None: any (one token serving a whole pool).
  std::optional<std::vector<std::string>> worker_names;
};

// What a call asks to do.
enum class Action {
  kRead,       // get, list, watch
  kSubmit,     // submit a job
  kChangeJob,  // cancel a job, change its hook, scale it: a submitter's own jobs only
};

class TokenAuthenticator {
 public:
  // Reads `path` now: INVALID_ARGUMENT naming the entry when it is malformed.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Load(
      const std::string& path, const Clock* clock = &Clock::Real());

  // The principal holding `token`; UNAUTHENTICATED when no entry has its hash.
  absl::StatusOr<Principal> Authenticate(const std::string& token);

  // The principal of a call, from its "authorization: Bearer TOKEN" metadata.
  absl::StatusOr<Principal> Authenticate(const grpc::ServerContextBase& context);
  // The TOKEN of that metadata; UNAUTHENTICATED without it.
  static absl::StatusOr<std::string> BearerToken(const grpc::ServerContextBase& context);

  // Whether the tokens in force are not the file's current text: its latest version was
  // refused (a bad edit, logged) or it cannot be read. Reads it again if due.
  bool Stale();

  // The SHA-256 of `token`, in hex: what the tokens file holds.
  static std::string Hash(const std::string& token);

 private:
  struct Entry {
    std::string principal;
    Role role = Role::kViewer;
    PathPolicy::PrincipalPaths paths;
    std::optional<std::vector<std::string>> worker_names;
  };
  using Table = absl::flat_hash_map<std::string, Entry>;  // by hash

  TokenAuthenticator(std::string path, const Clock* clock)
      : path_(std::move(path)), clock_(*clock) {}
  // The table of the file `path` whose text is `text`.
  static absl::StatusOr<Table> Parse(const std::string& path, const std::string& text);
  // One entry of the list: its hash and what it grants.
  static absl::StatusOr<std::pair<std::string, Entry>> ParseEntry(const YAML::Node& entry);
  // Reads the file again if its text changed since it was last read (checked once a
  // second).
  void ReloadIfChanged() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string path_;
  const Clock& clock_;
  absl::Mutex mu_;
  Table table_ ABSL_GUARDED_BY(mu_);
  std::string loaded_text_ ABSL_GUARDED_BY(mu_);     // the version the table is from
  std::string refused_text_ ABSL_GUARDED_BY(mu_);    // the latest version that did not parse
  std::string unreadable_ ABSL_GUARDED_BY(mu_);      // why the file could not be read, if so
  bool stale_ ABSL_GUARDED_BY(mu_) = false;          // as Stale() says
  uint64_t reads_started_ ABSL_GUARDED_BY(mu_) = 0;  // reloads begun, numbered
  uint64_t reads_applied_ ABSL_GUARDED_BY(mu_) = 0;  // the newest one that finished
  absl::Time checked_ ABSL_GUARDED_BY(mu_);
};

// Whether `principal` may do `action`; for kChangeJob, to a job `job_submitter`
// submitted. PERMISSION_DENIED saying what was missing.
absl::Status Authorize(const Principal& principal, Action action, const std::string& what,
                       const std::string& job_submitter = "");

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_CLIENT_AUTH_H_
