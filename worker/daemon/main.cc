// shardwise-worker: one daemon per GPU or CPU slot. See docs/operations.md.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/channel_credentials.h"
#include "common/coordinator_address.h"
#include "common/daemon_signals.h"
#include "common/metrics.h"
#include "common/metrics_http_server.h"
#include "common/self_restart.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/runtime/host_memory.h"
#include "worker/train/injected_faults.h"

#ifdef SHARDWISE_WITH_CUDA
#include "worker/cuda/cuda_rank_device.h"
#include "worker/cuda/gpu_info.h"
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

ABSL_FLAG(std::string, metrics_address, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty: not served");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set (with --metrics_address), the metrics port is written here once serving");

ABSL_FLAG(std::string, fault_injection, "",
          "for tests only: unit_order_reversed or unit_order_reversed_from=STEP makes this "
          "rank report its FSDP units in reverse order");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The Shardwise worker daemon. Usage: shardwise-worker [flags]");
  absl::ParseCommandLine(argc, argv);

  shardwise::WorkerOptions options;
  options.coordinator_address =
      shardwise::ResolveCoordinatorAddress(absl::GetFlag(FLAGS_coordinator));
  shardwise::ChannelSecurity security;
  security.ca_file = absl::GetFlag(FLAGS_tls_ca);
  security.cert_file = absl::GetFlag(FLAGS_tls_cert);
  security.key_file = absl::GetFlag(FLAGS_tls_key);
  auto credentials = shardwise::MakeChannelCredentials(security);
  if (!credentials.ok()) {
    std::fprintf(stderr, "shardwise-worker: %s\n",
                 std::string(credentials.status().message()).c_str());
    return 2;
  }
  options.credentials = *credentials;
  options.name = absl::GetFlag(FLAGS_name);
  if (options.name.empty() && !security.cert_file.empty()) {
    auto certified = shardwise::CertificateCommonName(security.cert_file);
    if (!certified.ok()) {
      std::fprintf(stderr, "shardwise-worker: %s\n",
                   std::string(certified.status().message()).c_str());
      return 2;
    }
    options.name = *certified;
  }
  if (options.name.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    options.name = absl::StrCat(host, ":", getpid());
  }
  const std::string device = absl::AsciiStrToLower(absl::GetFlag(FLAGS_device));
  if (device == "cpu") {
    options.device = shardwise::v1::CPU;
  } else if (device == "cuda") {
#ifdef SHARDWISE_WITH_CUDA
    auto gpu = shardwise::cuda::QueryGpu(absl::GetFlag(FLAGS_gpu));
    if (!gpu.ok()) {
      std::fprintf(stderr, "shardwise-worker: %s\n", std::string(gpu.status().message()).c_str());
      return 2;
    }
    options.device = shardwise::v1::CUDA;
    options.gpu = *gpu;
    options.make_device = shardwise::cuda::CudaRankDevices(gpu->index());
    options.available_memory = [index = gpu->index()] {
      return shardwise::cuda::FreeGpuMemory(index);
    };
    std::fprintf(
        stderr, "shardwise-worker: GPU %d: %s, %lld MiB, sm_%d%d, CUDA driver %s, NCCL %s\n",
        gpu->index(), gpu->name().c_str(), static_cast<long long>(gpu->memory_bytes() >> 20),
        gpu->compute_capability_major(), gpu->compute_capability_minor(),
        gpu->driver_version().c_str(), gpu->nccl_version().c_str());
#else
    std::fprintf(stderr,
                 "shardwise-worker: --device=cuda: this build has no CUDA data plane (build "
                 "with bazel build --config=cuda)\n");
    return 2;
#endif
  } else {
    std::fprintf(stderr, "shardwise-worker: --device: unknown value '%s' (expected cpu or cuda)\n",
                 device.c_str());
    return 2;
  }
  if (!absl::GetFlag(FLAGS_check_memory)) {
    options.available_memory = nullptr;
  } else if (options.device == shardwise::v1::CPU) {
    options.available_memory = shardwise::HostMemoryAvailable;
  }
  options.data_plane.hostname = absl::GetFlag(FLAGS_data_address);
  auto faults = shardwise::ParseInjectedFaults(absl::GetFlag(FLAGS_fault_injection));
  if (!faults.ok()) {
    std::fprintf(stderr, "shardwise-worker: %s\n", std::string(faults.status().message()).c_str());
    return 2;
  }
  options.faults = *std::move(faults);

  if (const int64_t grace = absl::GetFlag(FLAGS_stuck_abort_restart_ms); grace > 0) {
    options.stuck_abort_grace = absl::Milliseconds(grace);
    options.restart_process = [argv] { shardwise::RestartProcess(argv); };
  }

  shardwise::IgnoreBrokenPipes();
  const std::atomic<bool>& stop = shardwise::StopRequestedOnSignal();
  shardwise::MetricsRegistry metrics;
  std::unique_ptr<shardwise::MetricsHttpServer> metrics_server;
  if (const std::string address = absl::GetFlag(FLAGS_metrics_address); !address.empty()) {
    auto server = shardwise::MetricsHttpServer::Start(address, &metrics);
    if (!server.ok()) {
      std::fprintf(stderr, "shardwise-worker: %s\n",
                   std::string(server.status().message()).c_str());
      return 1;
    }
    metrics_server = std::move(*server);
    options.metrics = &metrics;
    if (const std::string file = absl::GetFlag(FLAGS_metrics_port_file); !file.empty()) {
      const std::string tmp = file + ".tmp";  // whole, or not at all
      std::ofstream(tmp) << metrics_server->port() << "\n";
      std::rename(tmp.c_str(), file.c_str());
    }
  }
  std::fprintf(stderr, "shardwise-worker %s: coordinator %s\n", options.name.c_str(),
               options.coordinator_address.c_str());
  shardwise::WorkerDaemon daemon(options);
  daemon.Run(stop);
  return 0;
}
