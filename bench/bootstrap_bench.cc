// A Gloo world's bootstrap through the coordinator's rendezvous: W ranks (threads of this
// process, each with its own gRPC channel and Gloo TCP device) connect a full mesh on
// loopback through a real RendezvousService, once with Gloo's own connectFullMesh (the
// baseline, in the same run) and once with worker/comm/full_mesh's. Prints, per world,
// the wall time to connect, the bytes the ranks read from the rendezvous and the store
// calls they made (a Gloo get is a wait and a read on the wire; a multiGet a wait and a
// read per 1024 keys). bench/bootstrap.sh records the table in bench/RESULTS.md.
//
//   bootstrap_bench --worlds=16,32,64

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server_builder.h"
#include "server/rendezvous_service.h"
#include "server/rendezvous_store.h"
#include "worker/comm/data_plane.h"
#include "worker/comm/grpc_rendezvous_store.h"

ABSL_FLAG(std::vector<std::string>, worlds, std::vector<std::string>({"16", "32", "64"}),
          "world sizes to connect");

namespace shardwise {
namespace {

// What a rank asks of its rendezvous store, counted.
struct Tally {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> bytes_read{0};
};

class CountingStore final : public MultiGetStore {
 public:
  CountingStore(GrpcRendezvousStore& store, Tally& tally) : store_(store), tally_(tally) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    ++tally_.calls;
    store_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    ++tally_.calls;
    std::vector<char> value = store_.get(key);
    tally_.bytes_read += static_cast<int64_t>(value.size());
    return value;
  }
  void wait(const std::vector<std::string>& keys) override {
    ++tally_.calls;
    store_.wait(keys);
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    ++tally_.calls;
    store_.wait(keys, timeout);
  }
  std::vector<std::vector<char>> multiGet(const std::vector<StoreRead>& reads) override {
    ++tally_.calls;
    std::vector<std::vector<char>> values = store_.multiGet(reads);
    for (const auto& value : values) tally_.bytes_read += static_cast<int64_t>(value.size());
    return values;
  }

 private:
  GrpcRendezvousStore& store_;
  Tally& tally_;
};

// Gloo's own connect, as the worker used it before full_mesh.
absl::Status ConnectWithGloo(gloo::rendezvous::Store& store, int rank, int world) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::Context context(rank, world);
    context.setTimeout(std::chrono::seconds(120));
    context.connectFullMesh(store, device);
  } catch (const std::exception& e) {
    return absl::UnavailableError(e.what());
  }
  return absl::OkStatus();
}

absl::Status ConnectWithFullMesh(gloo::rendezvous::Store& store, int rank, int world) {
  DataPlaneOptions options;
  options.timeout = std::chrono::seconds(120);
  return ConnectGlooContext(store, rank, world, options).status();
}

struct Run {
  double seconds = 0;
  int64_t calls = 0;
  int64_t bytes_read = 0;
};

using Connect = absl::Status (*)(gloo::rendezvous::Store&, int, int);

// Connects `world` ranks through a fresh attempt scope of `store` served at `target`.
absl::StatusOr<Run> ConnectWorld(RendezvousStore& store, const std::string& target, int attempt,
                                 int world, Connect connect) {
  std::vector<std::string> tokens;
  tokens.reserve(world);
  for (int r = 0; r < world; ++r) tokens.push_back(absl::StrCat("token-", attempt, "-", r));
  store.OpenScope("bench", attempt, tokens);
  Tally tally;
  std::vector<absl::Status> results(world);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> ranks;
  ranks.reserve(world);
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      v1::RendezvousScope scope;
      scope.set_job_id("bench");
      scope.set_attempt(attempt);
      scope.set_token(tokens[r]);
      GrpcRendezvousStore rendezvous(
          grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), scope,
          std::chrono::seconds(120), nullptr);
      CountingStore counted(rendezvous, tally);
      results[r] = connect(counted, r, world);
    });
  }
  for (auto& rank : ranks) rank.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  store.CloseScope("bench", attempt);
  for (int r = 0; r < world; ++r) {
    if (!results[r].ok()) return results[r];
  }
  return Run{seconds, tally.calls.load(), tally.bytes_read.load()};
}

int Main() {
  RendezvousStore::Limits limits;
  limits.max_bytes_per_scope = limits.max_bytes = size_t{8} << 30;
  RendezvousStore store(limits);
  RendezvousServiceImpl service(&store);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  const std::string target = absl::StrCat("127.0.0.1:", port);
  std::printf(
      "| world | Gloo connect s | full_mesh s | time ratio | Gloo bytes read | full_mesh bytes "
      "read | bytes ratio | Gloo store calls | full_mesh store calls |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  int attempt = 0;
  for (const std::string& text : absl::GetFlag(FLAGS_worlds)) {
    const int world = std::stoi(text);
    auto gloo = ConnectWorld(store, target, ++attempt, world, &ConnectWithGloo);
    auto mesh = ConnectWorld(store, target, ++attempt, world, &ConnectWithFullMesh);
    if (!gloo.ok() || !mesh.ok()) {
      std::fprintf(stderr, "world %d: %s / %s\n", world, gloo.status().ToString().c_str(),
                   mesh.status().ToString().c_str());
      return 1;
    }
    std::printf("| %d | %.2f | %.2f | %.2f | %lld | %lld | %.4f | %lld | %lld |\n", world,
                gloo->seconds, mesh->seconds, mesh->seconds / gloo->seconds,
                static_cast<long long>(gloo->bytes_read), static_cast<long long>(mesh->bytes_read),
                static_cast<double>(mesh->bytes_read) / static_cast<double>(gloo->bytes_read),
                static_cast<long long>(gloo->calls), static_cast<long long>(mesh->calls));
    std::fflush(stdout);
  }
  server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace shardwise

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return shardwise::Main();
}
