#include "server/client_auth.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/path_policy.h"
#include "common/printable_text.h"
#include "common/status_macros.h"
#include "common/token_hash.h"
#include "common/untrusted_file.h"
#include "common/worker_name.h"
#include "yaml-cpp/yaml.h"

namespace shardwise {
namespace {

constexpr absl::string_view kBearer = "Bearer ";

absl::StatusOr<Role> ParseRole(const std::string& name) {
  if (name == "viewer") return Role::kViewer;
  if (name == "submitter") return Role::kSubmitter;
  if (name == "admin") return Role::kAdmin;
  if (name == "worker") return Role::kWorker;
  return absl::InvalidArgumentError(
      absl::StrCat("role '", name, "' (expected viewer, submitter, admin or worker)"));
}

bool IsSha256Hex(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

// The tokens file's text. A Secret's file is a link Kubernetes swaps on an update: followed.
absl::StatusOr<std::string> ReadTokensText(const std::string& path) {
  constexpr uint64_t kMaxTokensFileBytes = uint64_t{4} << 20;
  absl::StatusOr<std::string> text = ReadUntrustedFile(path, kMaxTokensFileBytes, Links::kFollow);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file '", path, "': ", text.status().message()));
  }
  return text;
}

// An entry's optional list `name` of scalars, each checked (and made normal) by
// `item`, which gets the field's name (`name[i]`) and the scalar; nullopt without the
// key. The token file's lists (folders, worker names) share this shape.
using ListItem =
    std::function<absl::StatusOr<std::string>(const std::string& field, const std::string& scalar)>;
absl::StatusOr<std::optional<std::vector<std::string>>> ParseScalarList(const YAML::Node& entry,
                                                                        const char* name,
                                                                        const char* what,
                                                                        const ListItem& item) {
  if (!entry.IsMap() || !entry[name]) return std::nullopt;
  const YAML::Node list = entry[name];
  if (!list.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be a list of ", what));
  }
  std::vector<std::string> items;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = absl::StrCat(name, "[", i, "]");
    if (!list[i].IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must be a scalar, not a list or mapping"));
    }
    ASSIGN_OR_RETURN(std::string checked, item(field, list[i].Scalar()));
    items.push_back(std::move(checked));
  }
  return items;
}

// An entry's list of folders `name` (input_paths, output_paths): unset when the entry
// has none; else absolute paths of printable text, made normal.
absl::StatusOr<std::optional<std::vector<std::string>>> ParseFolders(const YAML::Node& entry,
                                                                     const char* name) {
  return ParseScalarList(
      entry, name, "absolute folder paths",
      [](const std::string& field, const std::string& folder) -> absl::StatusOr<std::string> {
        RETURN_IF_ERROR(CheckPathText(field, folder));
        RETURN_IF_ERROR(CheckAbsolutePath(field, folder));
        return LexicallyNormal(folder, "/");
      });
}

// The entry's `worker_names` (common/worker_name.h): nullopt without the key.
absl::StatusOr<std::optional<std::vector<std::string>>> ParseWorkerNames(const YAML::Node& entry) {
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> patterns,
                   ParseScalarList(entry, "worker_names", "worker names or prefixes ending in '*'",
                                   [](const std::string& field,
                                      const std::string& pattern) -> absl::StatusOr<std::string> {
                                     RETURN_IF_ERROR(CheckWorkerNamePattern(field, pattern));
                                     return pattern;
                                   }));
  if (patterns && (patterns->empty() || patterns->size() > kMaxWorkerNamePatterns)) {
    return absl::InvalidArgumentError(absl::StrCat("worker_names must list 1 to ",
                                                   kMaxWorkerNamePatterns,
                                                   " names or prefixes, not ", patterns->size()));
  }
  return patterns;
}

// INVALID_ARGUMENT naming a key the entry may not have: a misspelt `input_path` or
// `worker_name` would otherwise bind nothing, in silence.
absl::Status CheckEntryKeys(const YAML::Node& entry) {
  if (!entry.IsMap()) return absl::InvalidArgumentError("must be a mapping (principal: ...)");
  static constexpr const char* kKeys[] = {"principal",   "role",         "sha256",
                                          "input_paths", "output_paths", "worker_names"};
  for (const auto& item : entry) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key '", ShownValue(key),
          "' (an entry has principal, role, sha256, and optionally input_paths, output_paths or "
          "worker_names)"));
    }
  }
  return absl::OkStatus();
}

// The same folders, in any order.
bool SamePaths(const PathPolicy::PrincipalPaths& a, const PathPolicy::PrincipalPaths& b) {
  const auto as_set = [](const std::optional<std::vector<std::string>>& folders) {
    return folders.has_value() ? std::optional<std::set<std::string>>(
                                     std::in_place, folders->begin(), folders->end())
                               : std::nullopt;
  };
  return as_set(a.input) == as_set(b.input) && as_set(a.output) == as_set(b.output);
}

// Whether an entry of `role` may submit jobs, so that folders bind it.
bool Submits(Role role) { return role == Role::kSubmitter || role == Role::kAdmin; }

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kSubmitter:
      return "submitter";
    case Role::kAdmin:
      return "admin";
    case Role::kWorker:
      return "worker";
  }
  return "?";
}

std::string TokenAuthenticator::Hash(const std::string& token) { return TokenHash(token); }

absl::StatusOr<TokenAuthenticator::Table> TokenAuthenticator::Parse(const std::string& path,
                                                                    const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("tokens file '", path, "': ", error.what()));
  }
  const YAML::Node tokens = root["tokens"];
  if (!tokens || !tokens.IsSequence()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file '", path, "': expected a list under 'tokens:'"));
  }
  Table table;
  // A principal's folders are the same in each of its entries that may submit (two tokens
  // while one is rotated): which one a client's token matched must not change what its
  // jobs may touch. (A viewer's entry of the same name has none, and binds nothing.)
  absl::flat_hash_map<std::string, PathPolicy::PrincipalPaths> paths_of;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string where = absl::StrCat("tokens file '", path, "': entry ", i + 1);
    auto entry = ParseEntry(tokens[i]);
    if (!entry.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", entry.status().message()));
    }
    auto [known, first] = Submits(entry->second.role)
                              ? paths_of.try_emplace(entry->second.principal, entry->second.paths)
                              : std::pair{paths_of.end(), true};
    if (!first && !SamePaths(known->second, entry->second.paths)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", entry->second.principal,
                       "'s input_paths or output_paths differ from its earlier entry's"));
    }
    if (!table.emplace(entry->first, entry->second).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the same token twice"));
    }
  }
  return table;
}

absl::StatusOr<std::pair<std::string, TokenAuthenticator::Entry>> TokenAuthenticator::ParseEntry(
    const YAML::Node& entry) {
  auto field = [&](const char* name) -> std::string {
    return entry.IsMap() && entry[name] && entry[name].IsScalar() ? entry[name].Scalar() : "";
  };
  RETURN_IF_ERROR(CheckEntryKeys(entry));
  Entry parsed;
  parsed.principal = field("principal");
  RETURN_IF_ERROR(CheckPrincipalName(parsed.principal));
  ASSIGN_OR_RETURN(parsed.role, ParseRole(field("role")));
  const std::string hash = field("sha256");
  if (!IsSha256Hex(hash)) {
    return absl::InvalidArgumentError(
        "sha256 must be 64 lower-case hex digits (the token's hash, never the token)");
  }
  ASSIGN_OR_RETURN(parsed.paths.input, ParseFolders(entry, "input_paths"));
  ASSIGN_OR_RETURN(parsed.paths.output, ParseFolders(entry, "output_paths"));
  if (parsed.paths.any() && !Submits(parsed.role)) {
    return absl::InvalidArgumentError(
        absl::StrCat("input_paths and output_paths keep a principal's jobs to folders; a ",
                     RoleName(parsed.role), " submits none (give them to a submitter or admin)"));
  }
  ASSIGN_OR_RETURN(parsed.worker_names, ParseWorkerNames(entry));
  if (parsed.worker_names.has_value() && parsed.role != Role::kWorker) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_names bind the names a worker token registers; a ",
                     RoleName(parsed.role), "'s token registers no worker"));
  }
  return std::pair{hash, std::move(parsed)};
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Load(
    const std::string& path, const Clock* clock) {
  ASSIGN_OR_RETURN(std::string text, ReadTokensText(path));
  auto table = Parse(path, text);
  if (!table.ok()) return table.status();
  std::unique_ptr<TokenAuthenticator> authenticator(new TokenAuthenticator(path, clock));
  absl::MutexLock lock(&authenticator->mu_);
  authenticator->table_ = *std::move(table);
  authenticator->loaded_text_ = std::move(text);
  authenticator->checked_ = clock->Now();
  return authenticator;
}

void TokenAuthenticator::ReloadIfChanged() {
  uint64_t read = 0;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    if (now - checked_ < absl::Seconds(1)) return;
    checked_ = now;
    read = ++reads_started_;
  }
  // Its text, not its modification time: a file written in place within the file
  // system's time granularity keeps its time, and the end of such a write would never
  // be read. Read without the lock, which every call takes. (At most once a second.)
  absl::StatusOr<std::string> text = ReadTokensText(path_);
  absl::MutexLock lock(&mu_);
  // A read that stalled past a later one's (a slow volume) is older: the later stands.
  if (read < reads_applied_) return;
  reads_applied_ = read;
  if (!text.ok()) {
    // A file gone or unreadable (a Secret deleted) keeps the previous tokens: said once.
    stale_ = true;
    if (text.status().message() != unreadable_) {
      unreadable_ = std::string(text.status().message());
      LogError(LogContext(), absl::StrCat("keeping the previous tokens: ", unreadable_));
    }
    return;
  }
  unreadable_.clear();
  stale_ = *text != loaded_text_;
  if (*text == loaded_text_ || *text == refused_text_) return;
  auto table = Parse(path_, *text);
  if (!table.ok()) {
    // A bad edit must not lock everyone out: the previous table stays. (Logged once per
    // version of the file; the version its writer completes later is read again.)
    refused_text_ = *std::move(text);
    LogError(LogContext(), absl::StrCat("keeping the previous tokens: ", table.status().message()));
    return;
  }
  loaded_text_ = *std::move(text);
  table_ = *std::move(table);
  stale_ = false;
  LogInfo(LogContext(),
          absl::StrCat("tokens file '", path_, "' read again: ", table_.size(), " tokens"));
}

bool TokenAuthenticator::Stale() {
  ReloadIfChanged();
  absl::MutexLock lock(&mu_);
  return stale_;
}

absl::StatusOr<Principal> TokenAuthenticator::Authenticate(const std::string& token) {
  const std::string hash = Hash(token);
  ReloadIfChanged();
  absl::MutexLock lock(&mu_);
  auto it = table_.find(hash);
  if (it == table_.end()) {
    return absl::UnauthenticatedError(
        "the token is not one this coordinator knows (revoked, or for another coordinator)");
  }
  return Principal{it->second.principal, it->second.role, it->second.paths,
                   it->second.worker_names};
}

absl::StatusOr<Principal> TokenAuthenticator::Authenticate(const grpc::ServerContextBase& context) {
  ASSIGN_OR_RETURN(const std::string token, BearerToken(context));
  return Authenticate(token);
}

absl::StatusOr<std::string> TokenAuthenticator::BearerToken(
    const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this coordinator needs a token (metadata 'authorization: Bearer TOKEN'); the CLI "
        "sends the one in --token_file or $SHARDWISE_TOKEN");
  }
  // The scheme is case-insensitive (RFC 7235), and other clients pad it.
  const absl::string_view value =
      absl::StripAsciiWhitespace(absl::string_view(it->second.data(), it->second.size()));
  if (!absl::StartsWithIgnoreCase(value, kBearer)) {
    return absl::UnauthenticatedError("authorization: expected 'Bearer TOKEN'");
  }
  return std::string(absl::StripLeadingAsciiWhitespace(value.substr(kBearer.size())));
}

absl::Status Authorize(const Principal& principal, Action action, const std::string& what,
                       const std::string& job_submitter) {
  switch (action) {
    case Action::kRead:
      if (principal.role >= Role::kViewer) return absl::OkStatus();
      break;
    case Action::kSubmit:
      if (principal.role >= Role::kSubmitter) return absl::OkStatus();
      break;
    case Action::kChangeJob:
      if (principal.role == Role::kAdmin) return absl::OkStatus();
      if (principal.role == Role::kSubmitter) {
        if (job_submitter == principal.name) return absl::OkStatus();
        return absl::PermissionDeniedError(
            absl::StrCat(principal.name, " (submitter) may not ", what, " submitted by ",
                         job_submitter.empty() ? "an unknown principal" : job_submitter,
                         "; a submitter may change only the jobs it submitted"));
      }
      break;
  }
  return absl::PermissionDeniedError(absl::StrCat(
      principal.name, " (", RoleName(principal.role), ") may not ", what, ": it takes the ",
      action == Action::kRead     ? "viewer, submitter or admin role"
      : action == Action::kSubmit ? "submitter or admin role"
                                  : "submitter role (for its own jobs) or admin"));
}

}  // namespace shardwise
