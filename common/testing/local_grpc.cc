#include "common/testing/local_grpc.h"

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server_builder.h"

namespace shardwise::testing {

bool WaitFor(const std::function<bool()>& done, absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::unique_ptr<grpc::Server> StartLocalServer(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

std::shared_ptr<grpc::Channel> FixedWindowChannel(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetMaxReceiveMessageSize(64 << 20);  // the tests' large messages, once read
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), args);
}

}  // namespace shardwise::testing
