#include "tests/cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "worker/compute/cpu/blas_kernels.h"

namespace shardwise::testing {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

std::string JobEventLog(const v1::Job& job) {
  std::string log;
  for (const v1::JobEvent& event : job.events()) absl::StrAppend(&log, event.message(), "\n");
  return log;
}

bool HasEvent(const v1::Job& job, absl::string_view text) {
  for (const v1::JobEvent& event : job.events()) {
    if (absl::StrContains(event.message(), text)) return true;
  }
  return false;
}

namespace {

// This process's environment for the processes it starts, with OPENBLAS_CORETYPE pinned
// to the OpenBLAS kernels this test runs (where it is not set already): a worker then
// computes what the test computes in process, bit for bit, instead of restarting onto
// wider kernels that round otherwise (worker/compute/cpu/blas_kernels.h).
const std::vector<std::string>& ChildEnvironment() {
  static const std::vector<std::string> environment = [] {
    std::vector<std::string> variables;
    for (char** variable = environ; *variable != nullptr; ++variable) {
      variables.emplace_back(*variable);
    }
    if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
      variables.push_back("OPENBLAS_CORETYPE=" + cpu::BlasCoreName());
    }
    return variables;
  }();
  return environment;
}

}  // namespace

Process::Process(const std::vector<std::string>& argv, const std::string& log_path)
    : log_path_(log_path) {
  std::vector<char*> args;
  args.reserve(argv.size());
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> environment;
  for (const std::string& v : ChildEnvironment())
    environment.push_back(const_cast<char*>(v.c_str()));
  environment.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execve(args[0], args.data(), environment.data());
    std::perror("execve");
    _exit(127);
  }
}

Process::~Process() { Kill(); }

void Process::Signal(int signal) const {
  if (pid_ > 0 && !reaped_) kill(pid_, signal);
}

void Process::Kill() {
  if (pid_ <= 0 || reaped_) return;
  kill(pid_, SIGKILL);
  Wait();
}

int Process::Wait() {
  if (reaped_) return exit_code_;
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

bool Process::Running() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

std::string Cluster::BinaryPath(const std::string& target) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/shardwise/", target);
}

Cluster::Cluster(const ClusterOptions& options) : options_(options) {
  std::string pattern = testing::ScratchPath("cluster-XXXXXX");
  dir_ = mkdtemp(pattern.data());
}

Cluster::~Cluster() {
  workers_.clear();
  coordinator_.reset();
}

std::string Cluster::address() const { return absl::StrCat("127.0.0.1:", port_); }

namespace {

// Whether nothing on loopback holds `port` now.
bool PortIsFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return free;
}

// A port free now below the kernel's ephemeral range: a coordinator restarted on it, or
// started on it later, cannot find it taken by a port the kernel handed out meanwhile
// (every connection and every Gloo pair of the tests running beside this one takes one).
int PortBelowTheEphemeralRange() {
  int low = 32768;  // Linux's default, if the range cannot be read
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(std::max(1024, low / 2), std::max(1024, low - 1));
  for (int tries = 0; tries < 100; ++tries) {
    const int port = pick(random);
    if (PortIsFree(port)) return port;
  }
  return 0;  // the coordinator binds one of the kernel's choice
}

std::string AllowedPaths(const std::vector<std::string>& paths) {
  if (!paths.empty()) return absl::StrJoin(paths, ",");
  return testing::ScratchRoot();
}

}  // namespace

void Cluster::StartCoordinator() {
  const std::string port_file = absl::StrCat(dir_, "/port");
  unlink(port_file.c_str());
  ++coordinator_starts_;
  // Fixed at the first start: restarts rebind it (clients and workers know it).
  if (port_ == 0) port_ = PortBelowTheEphemeralRange();
  std::vector<std::string> argv = {
      BinaryPath("server/shardwise-coordinator"),
      absl::StrCat("--address=127.0.0.1:", port_),
      absl::StrCat("--port_file=", port_file),
      absl::StrCat("--state_file=", options_.state_file.empty() ? absl::StrCat(dir_, "/state.db")
                                                                : options_.state_file),
      absl::StrCat("--heartbeat_interval_ms=", options_.heartbeat_interval_ms),
      absl::StrCat("--heartbeat_timeout_ms=", options_.heartbeat_timeout_ms),
      absl::StrCat("--collective_timeout_ms=", options_.collective_timeout_ms),
      absl::StrCat("--hook_switch_lead_ms=", options_.hook_switch_lead_ms),
      absl::StrCat("--stall_warning_ms=", options_.stall_warning_ms),
      absl::StrCat("--stall_abort_ms=", options_.stall_abort_ms),
      absl::StrCat("--reattach_grace_ms=", options_.reattach_grace_ms),
      absl::StrCat("--allowed_input_paths=", AllowedPaths(options_.allowed_input_paths)),
      absl::StrCat("--allowed_output_paths=", AllowedPaths(options_.allowed_output_paths)),
  };
  if (options_.health_port && health_port_ == 0) health_port_ = PortBelowTheEphemeralRange();
  if (options_.health_port) {
    argv.push_back(absl::StrCat("--health_address=127.0.0.1:", health_port_));
  }
  if (options_.coordinator_metrics) {
    argv.push_back("--metrics_address=127.0.0.1:0");
    argv.push_back(absl::StrCat("--metrics_port_file=", dir_, "/coordinator.metrics-port"));
  }
  argv.insert(argv.end(), options_.coordinator_flags.begin(), options_.coordinator_flags.end());
  coordinator_ = std::make_unique<Process>(
      argv, absl::StrCat(dir_, "/coordinator-", coordinator_starts_, ".log"));
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(port_file);
    return static_cast<bool>(in >> port_) && port_ > 0;
  })) << "coordinator did not start; see "
      << coordinator_->log_path();
  if (client_ == nullptr) client_ = std::make_unique<Client>(address(), options_.client);
}

void Cluster::KillCoordinator() { coordinator_->Kill(); }

int Cluster::StopCoordinator() {
  coordinator_->Signal(SIGTERM);
  return coordinator_->Wait();
}

int Cluster::coordinator_metrics_port() const {
  int port = 0;
  std::ifstream in(absl::StrCat(dir_, "/coordinator.metrics-port"));
  in >> port;
  return port;
}

Process& Cluster::AddWorker(const std::string& name, const std::vector<std::string>& flags,
                            const std::vector<std::string>& launcher, bool wait) {
  std::vector<std::string> argv = launcher;
  for (std::string arg :
       {BinaryPath("worker/shardwise-worker"), absl::StrCat("--coordinator=", address()),
        absl::StrCat("--name=", name)}) {
    argv.push_back(std::move(arg));
  }
  argv.insert(argv.end(), options_.worker_flags.begin(), options_.worker_flags.end());
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto process = std::make_unique<Process>(argv, absl::StrCat(dir_, "/worker-", name, ".log"));
  Process& ref = *process;
  workers_[name] = std::move(process);
  if (!wait) return ref;
  // Connected: IDLE, or already BUSY when a job was waiting for it.
  EXPECT_TRUE(WaitFor([&] {
    const v1::WorkerState state = WorkerState(name);
    return state == v1::IDLE || state == v1::BUSY;
  })) << "worker "
      << name << " did not register; see " << ref.log_path();
  return ref;
}

bool Cluster::WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return condition();
}

v1::Job Cluster::WaitForState(const std::string& job_id, v1::JobState state,
                              absl::Duration timeout) {
  v1::Job last;
  // A job that ended otherwise will not reach `state`: no use waiting out the bound.
  const auto ended_otherwise = [&] {
    return (last.state() == v1::SUCCEEDED || last.state() == v1::FAILED ||
            last.state() == v1::CANCELLED) &&
           last.state() != state;
  };
  WaitFor(
      [&] {
        auto job = client_->Get(job_id);
        if (job.ok()) last = *job;
        return (job.ok() && job->state() == state) || ended_otherwise();
      },
      timeout);
  EXPECT_EQ(last.state(), state) << job_id << " did not reach " << v1::JobState_Name(state)
                                 << "; it is " << v1::JobState_Name(last.state()) << ": "
                                 << last.reason();
  return last;
}

bool Cluster::WaitForStep(const std::string& job_id, int64_t step, absl::Duration timeout) {
  return WaitFor(
      [&] {
        const absl::StatusOr<v1::Job> job = client_->Get(job_id);
        return job.ok() && job->progress().step() >= step;
      },
      timeout);
}

std::optional<v1::WorkerInfo> Cluster::Worker(const std::string& name) {
  auto workers = client_->ListWorkers();
  if (!workers.ok()) return std::nullopt;
  for (const auto& w : *workers) {
    if (w.id() == name) return w;
  }
  return std::nullopt;
}

v1::WorkerState Cluster::WorkerState(const std::string& name) {
  std::optional<v1::WorkerInfo> worker = Worker(name);
  return worker.has_value() ? worker->state() : v1::WORKER_STATE_UNSPECIFIED;
}

v1::JobSpec Cluster::WithSmallGpt(v1::JobSpec spec, int64_t vocab_size,
                                  const std::string& train_path) {
  spec.mutable_model()->Clear();
  v1::GptConfig* gpt = spec.mutable_model()->mutable_gpt();
  gpt->set_vocab_size(vocab_size);
  gpt->set_block_size(32);
  gpt->set_n_layer(2);
  gpt->set_n_head(2);
  gpt->set_n_embd(32);
  spec.clear_data();
  spec.mutable_data()->mutable_tokens()->set_train_path(train_path);
  return spec;
}

v1::JobSpec Cluster::Spec(int world_size) {
  v1::JobSpec spec;
  spec.set_name("test");
  for (int w : {8, 16, 4}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.set_global_batch_size(int64_t{4} * world_size);
  spec.set_steps(5);
  spec.set_world_size(world_size);
  return spec;
}

int Cluster::RunCli(const std::vector<std::string>& args, std::string* output) {
  std::string command = BinaryPath("client/shardwise");
  for (const std::string& a : args) absl::StrAppend(&command, " '", a, "'");
  return RunShell(command, output);
}

int RunShell(const std::string& command, std::string* output) {
  FILE* pipe = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  std::array<char, 4096> buffer;
  output->clear();
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output->append(buffer.data(), n);
  const int status = pclose(pipe);
  return WEXITSTATUS(status);
}

}  // namespace shardwise::testing
