#include "worker/comm/data_plane.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/transport/tcp/device.h"
#include "worker/comm/full_mesh.h"

namespace shardwise {

absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(gloo::rendezvous::Store& store,
                                                                  int rank, int size,
                                                                  const DataPlaneOptions& options) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    const bool bounded = options.connect_timeout.count() > 0;
    FullMeshOptions mesh;
    mesh.pair_timeout = bounded ? options.connect_timeout : options.timeout;
    // A connect timeout bounds the pairs only: the waits for the peers' keys keep the
    // store's own bound.
    mesh.store_timeout = bounded ? std::chrono::milliseconds(0) : options.timeout;
    auto context = ConnectFullMesh(store, device, rank, size, mesh);
    if (!context.ok()) {
      return absl::Status(context.status().code(),
                          absl::StrCat("connecting rank ", rank, " of ", size,
                                       " over Gloo/TCP: ", context.status().message()));
    }
    (*context)->setTimeout(options.timeout);
    return context;
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("connecting rank ", rank, " of ", size, " over Gloo/TCP: ", e.what()));
  }
}

absl::StatusOr<int64_t> VerifyDataPlane(const std::shared_ptr<gloo::Context>& context) {
  const int64_t size = context->size;
  int64_t value = context->rank;
  try {
    gloo::BarrierOptions barrier(context);
    gloo::barrier(barrier);
    gloo::AllreduceOptions allreduce(context);
    allreduce.setOutput(&value, 1);
    allreduce.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int64_t>));
    gloo::allreduce(allreduce);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("bootstrap collective on rank ", context->rank, ": ", e.what()));
  }
  const int64_t expected = size * (size - 1) / 2;
  if (value != expected) {
    return absl::DataLossError(absl::StrCat("bootstrap all-reduce on rank ", context->rank,
                                            " gave ", value, ", expected ", expected));
  }
  return value;
}

}  // namespace shardwise
