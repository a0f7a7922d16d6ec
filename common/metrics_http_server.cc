#include "common/metrics_http_server.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "httplib.h"

namespace shardwise {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, const MetricsRegistry* registry) {
  const std::optional<HostPort> split = SplitHostPort(address);  // [::1]:9090 too
  if (!split.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not host:port"));
  }
  const std::string& host = split->host;
  const int port = split->port;
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->server_ = std::make_unique<httplib::Server>();
  // cpp-httplib's default also sets SO_REUSEPORT, which would let a second process
  // (another coordinator, say) listen on the same port unnoticed; only SO_REUSEADDR.
  server->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server->server_->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Exposition(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server->server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Shardwise metrics: GET /metrics (Prometheus text format)\n", "text/plain");
  });
  // Liveness for probes: the process runs and answers.
  server->server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server->port_ = port == 0 ? server->server_->bind_to_any_port(host)
                            : (server->server_->bind_to_port(host, port) ? port : -1);
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address,
                                               " (address in use, or not an address here)"));
  }
  server->thread_ = std::thread([raw = server->server_.get()] { raw->listen_after_bind(); });
  // stop() is a no-op until the server runs: wait for it, so the destructor never hangs.
  while (!server->server_->is_running()) std::this_thread::yield();
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace shardwise
