#include "worker/comm/data_plane.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace shardwise {

absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(gloo::rendezvous::Store& store,
                                                                  int rank, int size,
                                                                  const DataPlaneOptions& options) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(store, device);
    return std::shared_ptr<gloo::Context>(context);
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
