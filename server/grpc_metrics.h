#ifndef SHARDWISE_SERVER_GRPC_METRICS_H_
#define SHARDWISE_SERVER_GRPC_METRICS_H_

// Counts every RPC the coordinator answers, by method and status code, and times the
// unary ones, as a gRPC server interceptor. Methods are labelled only by the names the
// coordinator serves (anything else is "other"), so a client cannot grow the label set.

#include <memory>
#include <set>
#include <string>

#include "common/metrics.h"
#include "grpcpp/support/server_interceptor.h"

namespace shardwise {

class GrpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit GrpcMetricsFactory(MetricsRegistry* registry);
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const std::set<std::string> methods_;  // "/shardwise.v1.JobService/GetJob", ...
  Family<Counter>& requests_;
  Family<Histogram>& seconds_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_GRPC_METRICS_H_
