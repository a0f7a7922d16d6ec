#ifndef SHARDWISE_WORKER_COMM_DATA_PLANE_H_
#define SHARDWISE_WORKER_COMM_DATA_PLANE_H_

// The data plane's bootstrap on CPUs: a Gloo context over TCP, built through the
// coordinator's rendezvous store, and a check that it really carries collectives.
// Gloo throws; everything here returns absl::Status instead.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gloo/context.h"
#include "gloo/rendezvous/store.h"

namespace shardwise {

struct DataPlaneOptions {
  std::string hostname = "127.0.0.1";  // the address peers connect to
  std::chrono::milliseconds timeout{60000};
  // The context's timeout while its pairs connect (0: `timeout`). Gloo's TCP pair waits
  // 5 times its context's timeout for its peer's first connection, and nothing else ends
  // that wait: a peer that published its address and then gave the rendezvous up (a
  // membership epoch superseded, epoch_store.h) holds this rank there that long. Set, the
  // store's waits inside the connect keep the store's own bound (its wait(keys)).
  std::chrono::milliseconds connect_timeout{0};
};

// Connects rank `rank` of `size` to every other rank (full mesh over TCP).
absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(gloo::rendezvous::Store& store,
                                                                  int rank, int size,
                                                                  const DataPlaneOptions& options);

// A barrier, then an all-reduce (SUM) of each rank's number: every rank must see
// 0 + 1 + ... + (size - 1). Returns that sum.
absl::StatusOr<int64_t> VerifyDataPlane(const std::shared_ptr<gloo::Context>& context);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_DATA_PLANE_H_
