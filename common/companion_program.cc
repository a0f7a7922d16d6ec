#include "common/companion_program.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace shardwise {
namespace {

constexpr absl::string_view kRunfilesVariable = "RUNFILES_DIR";

bool IsExecutable(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) && ::access(path.c_str(), X_OK) == 0;
}

// The places FindCompanionProgram looks in, in its order.
std::vector<CompanionProgram> Candidates(absl::string_view name, absl::string_view runfiles_path) {
  std::vector<CompanionProgram> candidates;
  const auto in_runfiles = [&](const std::string& runfiles_dir) {
    candidates.push_back(
        {(std::filesystem::path(runfiles_dir) / "shardwise" / std::string(runfiles_path)).string(),
         runfiles_dir});
  };
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back({(self.parent_path() / std::string(name)).string(), ""});
    in_runfiles(self.string() + ".runfiles");
  }
  for (const char* variable : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    const char* runfiles = std::getenv(variable);
    if (runfiles != nullptr && *runfiles != '\0') in_runfiles(runfiles);
  }
  const char* path_variable = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path_variable ? path_variable : "", ':', absl::SkipEmpty())) {
    candidates.push_back(
        {(std::filesystem::path(std::string(dir)) / std::string(name)).string(), ""});
  }
  return candidates;
}

// execve's argv and envp, made before a fork so that the child allocates nothing: this
// process's environment with $RUNFILES_DIR naming the tree the program was found in.
class ExecArguments {
 public:
  ExecArguments(const CompanionProgram& program, const std::vector<std::string>& args)
      : args_(args) {
    const std::string replaced = absl::StrCat(kRunfilesVariable, "=");
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (program.runfiles_dir.empty() || !absl::StartsWith(*entry, replaced)) {
        environment_.emplace_back(*entry);
      }
    }
    if (!program.runfiles_dir.empty()) environment_.push_back(replaced + program.runfiles_dir);
    argv_ = Pointers(args_);
    envp_ = Pointers(environment_);
  }

  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return envp_.data(); }

 private:
  static std::vector<char*> Pointers(std::vector<std::string>& strings) {
    std::vector<char*> pointers;
    pointers.reserve(strings.size() + 1);
    for (std::string& s : strings) pointers.push_back(s.data());
    pointers.push_back(nullptr);
    return pointers;
  }

  std::vector<std::string> args_;
  std::vector<std::string> environment_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

absl::Status ExecFailed(const CompanionProgram& program) {
  return absl::InternalError(absl::StrCat("cannot run ", program.path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<CompanionProgram> FindCompanionProgram(absl::string_view name,
                                                      absl::string_view runfiles_path) {
  std::vector<std::string> looked;
  for (CompanionProgram& candidate : Candidates(name, runfiles_path)) {
    if (IsExecutable(candidate.path)) return std::move(candidate);
    looked.push_back(std::move(candidate.path));
  }
  return absl::NotFoundError(absl::StrCat("the program ", name, " was not found (looked for ",
                                          absl::StrJoin(looked, ", "), ")"));
}

absl::Status ExecProgram(const CompanionProgram& program, const std::vector<std::string>& args) {
  const ExecArguments exec(program, args);
  ::execve(program.path.c_str(), exec.argv(), exec.envp());
  return ExecFailed(program);
}

absl::StatusOr<std::string> RunAndCapture(const CompanionProgram& program,
                                          const std::vector<std::string>& args) {
  const ExecArguments exec(program, args);
  int out[2];
  if (::pipe(out) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execve(program.path.c_str(), exec.argv(), exec.envp());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string output;
  char block[4096];
  ssize_t n;
  while ((n = ::read(out[0], block, sizeof(block))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output.append(block, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string& name = program.path;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return output;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {  // our programs' "invalid argument"
    return absl::InvalidArgumentError(absl::StrCat(name, " refused its arguments"));
  }
  return absl::InternalError(absl::StrCat(
      name, WIFEXITED(status) ? absl::StrCat(" exited with status ", WEXITSTATUS(status))
                              : absl::StrCat(" was killed by signal ", WTERMSIG(status))));
}

}  // namespace shardwise
