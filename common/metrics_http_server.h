#ifndef SHARDWISE_COMMON_METRICS_HTTP_SERVER_H_
#define SHARDWISE_COMMON_METRICS_HTTP_SERVER_H_

// Serves a MetricsRegistry over HTTP for Prometheus to scrape: GET /metrics answers the
// text exposition format; GET /healthz answers "ok" (a liveness probe's target); GET /
// says where the metrics are. Built on cpp-httplib
// (Debian's libcpp-httplib), with its own small thread pool.
//
// Lifecycle: Start() binds and serves; the destructor stops serving and joins.

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace httplib {
class Server;
}

namespace shardwise {

class MetricsHttpServer {
 public:
  // `address` is host:port (port 0 picks a free one). INVALID_ARGUMENT for an address
  // that is not host:port, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                  const MetricsRegistry* registry);
  ~MetricsHttpServer();
  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_METRICS_HTTP_SERVER_H_
