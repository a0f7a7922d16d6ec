#include "server/grpc_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/codegen/status_code_enum.h"

namespace shardwise {
namespace {

std::set<std::string> ServedMethods() {
  std::set<std::string> methods;
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const char* name : {"shardwise.v1.JobService", "shardwise.v1.WorkerService",
                           "shardwise.v1.RendezvousService", "grpc.health.v1.Health"}) {
    const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(name);
    if (service == nullptr) continue;
    for (int m = 0; m < service->method_count(); ++m) {
      methods.insert(absl::StrCat("/", name, "/", service->method(m)->name()));
    }
  }
  return methods;
}

const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  return index >= 0 && index < 17 ? kNames[index] : "UNKNOWN";
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(std::string method, bool unary, Family<Counter>* requests,
                     Family<Histogram>* seconds)
      : method_(std::move(method)), unary_(unary), requests_(requests), seconds_(seconds) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      requests_->With({method_, CodeName(methods->GetSendStatus().error_code())}).Increment();
      if (unary_) seconds_->With({method_}).ObserveDuration(Clock::Real().Now() - start_);
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const bool unary_;
  Family<Counter>* const requests_;
  Family<Histogram>* const seconds_;
  const absl::Time start_ = Clock::Real().Now();
};

}  // namespace

GrpcMetricsFactory::GrpcMetricsFactory(MetricsRegistry* registry)
    : methods_(ServedMethods()),
      requests_(registry->AddCounter("shardwise_coordinator_grpc_requests_total",
                                     "RPCs answered, by method and status code.",
                                     {"method", "code"})),
      seconds_(registry->AddHistogram("shardwise_coordinator_grpc_request_seconds",
                                      "Time to answer a unary RPC, by method.", LatencyBuckets(),
                                      {"method"})) {}

grpc::experimental::Interceptor* GrpcMetricsFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const std::string method = methods_.count(info->method()) > 0 ? info->method() : "other";
  return new MetricsInterceptor(method,
                                info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY,
                                &requests_, &seconds_);
}

}  // namespace shardwise
