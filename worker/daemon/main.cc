// shardwise-worker: one daemon per GPU or CPU slot. See docs/operations.md.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/channel_credentials.h"
#include "common/command_line_flags.h"
#include "common/coordinator_address.h"
#include "common/daemon_signals.h"
#include "common/log.h"
#include "common/log_flags.h"
#include "common/metrics.h"
#include "common/metrics_http_server.h"
#include "common/path_policy.h"
#include "common/port_file.h"
#include "common/printable_text.h"
#include "common/self_restart.h"
#include "common/status_macros.h"
#include "worker/comm/data_plane_probe.h"
#include "worker/compute/cpu/blas_kernels.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/runtime/host_memory.h"
#include "worker/train/injected_faults.h"

#ifdef SHARDWISE_WITH_CUDA
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/cuda_rank_device.h"
#include "worker/cuda/gpu_info.h"
#include "worker/cuda/nccl_communicator.h"
#endif

ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port (default: $SHARDWISE_COORDINATOR, else 127.0.0.1:7070)");
ABSL_FLAG(std::string, name, "",
          "stable worker name (default: the common name of --tls_cert, else hostname:pid)");
ABSL_FLAG(std::string, tls_ca, "",
          "the CA the coordinator's certificate chains to: talk TLS (none: plaintext)");
ABSL_FLAG(std::string, tls_cert, "",
          "this worker's certificate (PEM), for a coordinator with --worker_ca; its common "
          "name is the worker's name");
ABSL_FLAG(std::string, tls_key, "", "the private key of --tls_cert");
ABSL_FLAG(int32_t, tls_reload_seconds, 60,
          "how often --tls_ca, --tls_cert and --tls_key are read again (rotation without a "
          "restart)");
ABSL_FLAG(std::string, token_file, "",
          "a file holding this worker's token (`shardwise token create --role=worker`), for a "
          "coordinator with --tokens_file that asks no certificate of workers (no --worker_ca)");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda");
ABSL_FLAG(int, gpu, 0,
          "with --device=cuda: the CUDA device (ordinal) this worker drives; "
          "run one worker per GPU");
ABSL_FLAG(std::string, data_address, "127.0.0.1",
          "address peers reach this worker's data plane at (Gloo/TCP)");

ABSL_FLAG(bool, check_memory, true,
          "before an attempt starts, compare the job's estimated memory per rank with what is "
          "left (host memory for CPU workers: MemAvailable, the address-space and cgroup "
          "limits; free GPU memory for CUDA workers) and fail the attempt at once if it does "
          "not fit");

ABSL_FLAG(int64_t, stuck_abort_restart_ms, 5000,
          "an attempt told to abort that has not ended this long after (a collective blocked "
          "on a frozen peer cannot be interrupted) makes the worker restart itself in place "
          "(same pid, same flags), so that it is idle again at once; 0: never");
ABSL_FLAG(int64_t, leave_grace_ms, 20000,
          "on SIGTERM, how long the rank of a fault-tolerant job has to finish its step and "
          "leave with its group before it is stopped as any other");

ABSL_FLAG(std::string, metrics_address, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty: not served");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set (with --metrics_address), the metrics port is written here once serving");

ABSL_FLAG(std::vector<std::string>, allowed_input_paths, {},
          "folders (comma-separated) this worker lets jobs read under, whatever the "
          "coordinator allows; none given: the coordinator's roots alone");
ABSL_FLAG(std::vector<std::string>, allowed_output_paths, {},
          "folders (comma-separated) this worker lets jobs write under, whatever the "
          "coordinator allows; none given: the coordinator's roots alone");
ABSL_FLAG(std::string, fault_injection, "",
          "for tests only: unit_order_reversed or unit_order_reversed_from=STEP makes this "
          "rank report its FSDP units in reverse order; never_join_rendezvous keeps it out "
          "of its rendezvous; fail_after=STEPS:PART fails its checkpoint or evaluation after "
          "STEPS steps, once; sigkill_at=STEP:POINT kills this worker as its rank enters "
          "phase or collective POINT of step STEP (STEP any: of any step); "
          "no_thread_at=STEP:POINT throws there what std::thread throws out of threads, once; "
          "pause_at=STEP:POINT:MS stops it there for MS milliseconds; hold_at=STEP:POINT:FILE "
          "until FILE exists; leave_after=STEP makes its rank leave with its group after step "
          "STEP; several joined by commas (docs/operations.md)");

namespace shardwise {
namespace {

// The coordinator's address, the channel's credentials and this worker's stable name.
absl::Status ConfigureIdentity(WorkerOptions* options) {
  ASSIGN_OR_RETURN(options->coordinator_address,
                   ResolveCoordinatorAddress(absl::GetFlag(FLAGS_coordinator)));
  ChannelSecurity security;
  security.ca_file = absl::GetFlag(FLAGS_tls_ca);
  security.cert_file = absl::GetFlag(FLAGS_tls_cert);
  security.key_file = absl::GetFlag(FLAGS_tls_key);
  const int32_t reload = absl::GetFlag(FLAGS_tls_reload_seconds);
  RETURN_IF_ERROR(CheckFlagAtLeast("tls_reload_seconds", reload, 1));
  security.reload_seconds = static_cast<unsigned>(reload);
  ASSIGN_OR_RETURN(options->credentials, MakeChannelCredentials(security));
  if (const std::string file = absl::GetFlag(FLAGS_token_file); !file.empty()) {
    ASSIGN_OR_RETURN(options->token, ReadBearerToken("--token_file", file));
    options->token_file = file;
    RETURN_IF_ERROR(CheckTokenTransport(security, options->coordinator_address, options->token));
  }
  options->name = absl::GetFlag(FLAGS_name);
  if (!security.cert_file.empty()) {
    // The coordinator knows a worker with a certificate by its common name and refuses
    // another: told here at once, rather than by a registration refused every 5 s.
    ASSIGN_OR_RETURN(const std::string common_name, CertificateCommonName(security.cert_file));
    if (options->name.empty()) options->name = common_name;
    if (options->name != common_name) {
      return absl::InvalidArgumentError(
          absl::StrCat("--name: '", ShownValue(options->name), "' differs from '",
                       ShownValue(common_name), "', the common name of --tls_cert ",
                       security.cert_file, " (a worker is known by its certificate's name)"));
    }
  }
  if (options->name.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    options->name = absl::StrCat(host, ":", getpid());
  }
  return absl::OkStatus();
}

// A CUDA worker: its GPU, the factory of its ranks' devices, its free memory.
absl::Status ConfigureGpu(WorkerOptions* options) {
#ifdef SHARDWISE_WITH_CUDA
  ASSIGN_OR_RETURN(v1::GpuInfo gpu, cuda::QueryGpu(absl::GetFlag(FLAGS_gpu)));
  options->device = v1::CUDA;
  options->gpu = gpu;
  options->make_device = cuda::CudaRankDevices(gpu.index());
  options->memory.available = [index = gpu.index()] { return cuda::FreeGpuMemory(index); };
  LogInfo(LogContext(),
          absl::StrCat("GPU ", gpu.index(), ": ", gpu.name(), ", ", gpu.memory_bytes() >> 20,
                       " MiB, sm_", gpu.compute_capability_major(), gpu.compute_capability_minor(),
                       ", CUDA driver ", gpu.driver_version(), ", NCCL ", gpu.nccl_version(),
                       ", cuDNN ", gpu.cudnn_version().empty() ? "none" : gpu.cudnn_version()));
  LogInfo(LogContext(), cuda::ProcessNcclLaunchPlan().description);
  if (cuda::SynchronousModeRequested()) {
    LogWarning(LogContext(), absl::StrCat(cuda::kSynchronousModeVariable,
                                          "=1: every operation finishes on its stream before the "
                                          "next (a debugging mode; slow)"));
  }
  return absl::OkStatus();
#else
  return absl::InvalidArgumentError(
      "--device=cuda: this build has no CUDA data plane (build with bazel build "
      "--config=cuda)");
#endif
}

// The device this worker offers, and how it measures the memory it has left.
absl::Status ConfigureDevice(WorkerOptions* options) {
  const std::string device = absl::AsciiStrToLower(absl::GetFlag(FLAGS_device));
  if (device == "cpu") {
    options->device = v1::CPU;
    options->memory.available = HostMemoryAvailable;
  } else if (device == "cuda") {
    RETURN_IF_ERROR(ConfigureGpu(options));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: unknown value '", device, "' (expected cpu or cuda)"));
  }
  // Host memory on every worker: a CUDA rank's host side (staging, the final model's
  // units) counts against its pod's limit too.
  options->memory.host_headroom = ThisCgroupMemoryBeforeOomKill;
  if (!absl::GetFlag(FLAGS_check_memory)) options->memory = {};
  return absl::OkStatus();
}

// Fault injection for tests, the data-plane address, and the restart (or, when stopping,
// the exit) of a stuck abort.
absl::Status ConfigureRuntime(char** argv, WorkerOptions* options) {
  options->data_plane.hostname = absl::GetFlag(FLAGS_data_address);
  // An address this host cannot listen on would fail every job it is given, each blamed
  // on the job (a rank whose Gloo pair cannot bind): the worker does not start.
  if (const absl::Status listenable =
          DataPlaneProbeListener::CheckListenable(options->data_plane.hostname);
      !listenable.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_address: ", listenable.message(),
                     " (give an address of this host that peers reach it at)"));
  }
  ASSIGN_OR_RETURN(options->faults, ParseInjectedFaults(absl::GetFlag(FLAGS_fault_injection)));
  const int64_t leave_grace = absl::GetFlag(FLAGS_leave_grace_ms);
  RETURN_IF_ERROR(CheckFlagAtLeast("leave_grace_ms", leave_grace, 0));
  options->leave_grace = absl::Milliseconds(leave_grace);
  const int64_t grace = absl::GetFlag(FLAGS_stuck_abort_restart_ms);
  RETURN_IF_ERROR(CheckFlagAtLeast("stuck_abort_restart_ms", grace, 0));
  if (grace > 0) {
    options->stuck_abort_grace = absl::Milliseconds(grace);
    // A stop that came first is honoured by the daemon's own shutdown (exit_process).
    options->restart_process = [argv] {
      if (!HandStopSignalsToTheSystem()) RestartProcess(argv);
    };
    options->exit_process = [](int exit_code) { std::_Exit(exit_code); };
  }
  return absl::OkStatus();
}

// With --metrics_address, serves `metrics` there (null without), and writes the port to
// --metrics_port_file.
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetrics(MetricsRegistry* metrics) {
  const std::string address = absl::GetFlag(FLAGS_metrics_address);
  if (address.empty()) return nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> server,
                   MetricsHttpServer::Start(address, metrics));
  WritePortFile(absl::GetFlag(FLAGS_metrics_port_file), server->port());
  return server;
}

// --allowed_input_paths and --allowed_output_paths: the worker's own bound on what jobs
// may read and write (a side left out: no bound of the worker's).
absl::Status ConfigurePaths(WorkerOptions* options) {
  const std::vector<std::string> inputs = absl::GetFlag(FLAGS_allowed_input_paths);
  const std::vector<std::string> outputs = absl::GetFlag(FLAGS_allowed_output_paths);
  if (inputs.empty() && outputs.empty()) return absl::OkStatus();
  for (const auto& [flag, roots] : {std::pair{"--allowed_input_paths", &inputs},
                                    std::pair{"--allowed_output_paths", &outputs}}) {
    if (roots->size() > kMaxWorkerRoots) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": ", roots->size(), " folders, past the most (", kMaxWorkerRoots, ")"));
    }
    // An empty entry ("--allowed_output_paths=,") would leave a side with no folder, which
    // the coordinator refuses at registration, after the worker had started.
    if (const auto empty = std::find(roots->begin(), roots->end(), ""); empty != roots->end()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", absl::StrJoin(*roots, ","),
                                                     "' holds an empty folder name (entry ",
                                                     empty - roots->begin() + 1, ")"));
    }
  }
  const auto or_everything = [](const std::vector<std::string>& roots) {
    return roots.empty() ? std::vector<std::string>{"/"} : roots;
  };
  absl::StatusOr<PathPolicy> ceiling = PathPolicy::Create(
      or_everything(inputs), or_everything(outputs), std::filesystem::current_path().string());
  if (!ceiling.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--allowed_input_paths / --allowed_output_paths: ", ceiling.status().message()));
  }
  options->path_ceiling = *std::move(ceiling);
  return absl::OkStatus();
}

absl::Status Configure(char** argv, WorkerOptions* options) {
  RETURN_IF_ERROR(ConfigureIdentity(options));
  RETURN_IF_ERROR(ConfigureDevice(options));
  RETURN_IF_ERROR(ConfigurePaths(options));
  return ConfigureRuntime(argv, options);
}

}  // namespace
}  // namespace shardwise

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The Shardwise worker daemon. Usage: shardwise-worker [flags]");
  absl::ParseCommandLine(argc, argv);
  const absl::Status logging = shardwise::ConfigureLoggingFromFlags("worker");
  if (!logging.ok()) {
    std::fprintf(stderr, "shardwise-worker: %s\n", std::string(logging.message()).c_str());
    return 2;
  }
  using shardwise::LogContext;
  // Named from the start where --name says it (else once Configure finds the name).
  shardwise::SetProcessLogContext(LogContext().Worker(absl::GetFlag(FLAGS_name)));
  // Before any thread or socket exists: OpenBLAS fixes its kernels as it loads.
  if (const auto upgrade = shardwise::cpu::BlasCoreUpgradeHere()) {
    shardwise::LogInfo(LogContext(), upgrade->Describe());
    shardwise::cpu::RestartWithBlasCore(*upgrade, argv);
  }

  shardwise::WorkerOptions options;
  if (const absl::Status configured = shardwise::Configure(argv, &options); !configured.ok()) {
    shardwise::LogError(LogContext(), configured.message());
    return 2;
  }
  shardwise::SetProcessLogContext(LogContext().Worker(options.name));
  shardwise::IgnoreBrokenPipes();
  const std::atomic<bool>& stop = shardwise::StopRequestedOnSignal();
  shardwise::MetricsRegistry metrics;
  auto metrics_server = shardwise::StartMetrics(&metrics);
  if (!metrics_server.ok()) {
    shardwise::LogError(LogContext(), metrics_server.status().message());
    return 1;
  }
  if (*metrics_server != nullptr) options.metrics = &metrics;
  shardwise::LogInfo(LogContext(), absl::StrCat("coordinator ", options.coordinator_address));
  shardwise::WorkerDaemon daemon(options);
  if (const absl::Status refused = daemon.Run(stop); !refused.ok()) {
    shardwise::LogError(LogContext(), std::string(refused.message()));
    return shardwise::kExitRefused;
  }
  return 0;
}
