#ifndef SHARDWISE_COMMON_TESTING_LOCAL_GRPC_H_
#define SHARDWISE_COMMON_TESTING_LOCAL_GRPC_H_

// A real gRPC server on loopback and a client that stops reading, for tests of what a
// server does when its writes wait on a client (HTTP/2's flow control holds them).

#include <functional>
#include <memory>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/server.h"

namespace shardwise::testing {

// Polls `done` every 10 ms for up to `limit` of real time; whether it came true.
bool WaitFor(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(30));

// A server of `service` on 127.0.0.1, on a port of the kernel's choosing (`*port`);
// null if it could not start.
std::unique_ptr<grpc::Server> StartLocalServer(grpc::Service* service, int* port);

// A channel to 127.0.0.1:`port` whose streams' windows stay at HTTP/2's initial 64 KiB
// (no bandwidth probe grows them): a larger message waits until its client reads.
std::shared_ptr<grpc::Channel> FixedWindowChannel(int port);

}  // namespace shardwise::testing

#endif  // SHARDWISE_COMMON_TESTING_LOCAL_GRPC_H_
