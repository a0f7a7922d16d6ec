#include "common/companion_program.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace shardwise {
namespace {

bool IsExecutable(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

absl::StatusOr<std::string> FindCompanionProgram(absl::string_view name,
                                                 absl::string_view runfiles_path) {
  std::vector<std::filesystem::path> candidates;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(self.parent_path() / std::string(name));
    candidates.push_back(std::filesystem::path(self.string() + ".runfiles") / "shardwise" /
                         std::string(runfiles_path));
  }
  // A Bazel test's runfiles, which a program the test runs inherits: its own runfiles
  // tree beside its file exists only once Bazel has built it as a target of its own.
  for (const char* variable : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    const char* runfiles = std::getenv(variable);
    if (runfiles != nullptr && *runfiles != '\0') {
      candidates.push_back(std::filesystem::path(runfiles) / "shardwise" /
                           std::string(runfiles_path));
    }
  }
  const char* path_variable = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path_variable ? path_variable : "", ':', absl::SkipEmpty())) {
    candidates.push_back(std::filesystem::path(std::string(dir)) / std::string(name));
  }
  std::vector<std::string> looked;
  for (const std::filesystem::path& candidate : candidates) {
    if (IsExecutable(candidate)) return candidate.string();
    looked.push_back(candidate.string());
  }
  return absl::NotFoundError(absl::StrCat("the program ", name, " was not found (looked for ",
                                          absl::StrJoin(looked, ", "), ")"));
}

absl::Status ExecProgram(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execv(program.c_str(), argv.data());
  return absl::InternalError(absl::StrCat("cannot run ", program, ": ", std::strerror(errno)));
}

absl::StatusOr<std::string> RunAndCapture(const std::string& program,
                                          const std::vector<std::string>& args) {
  int out[2];
  if (::pipe(out) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    (void)ExecProgram(program, args);
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
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return output;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {  // our programs' "invalid argument"
    return absl::InvalidArgumentError(absl::StrCat(program, " refused its arguments"));
  }
  return absl::InternalError(absl::StrCat(
      program, WIFEXITED(status) ? absl::StrCat(" exited with status ", WEXITSTATUS(status))
                                 : absl::StrCat(" was killed by signal ", WTERMSIG(status))));
}

}  // namespace shardwise
