#include "worker/comm/data_plane.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace shardwise {
namespace {

// The store as Gloo's connect sees it when the context's timeout is the short connect
// timeout: its waits keep the store's own bound (Gloo passes its context's).
class OwnTimeoutStore final : public gloo::rendezvous::Store {
 public:
  explicit OwnTimeoutStore(gloo::rendezvous::Store& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    store_.wait(keys);
  }

 private:
  gloo::rendezvous::Store& store_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(gloo::rendezvous::Store& store,
                                                                  int rank, int size,
                                                                  const DataPlaneOptions& options) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    const bool bounded = options.connect_timeout.count() > 0;
    OwnTimeoutStore own(store);
    context->setTimeout(bounded ? options.connect_timeout : options.timeout);
    context->connectFullMesh(bounded ? own : store, device);
    context->setTimeout(options.timeout);
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
