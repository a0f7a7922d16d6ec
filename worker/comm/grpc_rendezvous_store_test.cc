#include "worker/comm/grpc_rendezvous_store.h"

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "gloo/common/error.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

// A rendezvous service that answers each of its next `refusals` calls with `refusal`
// before serving as the coordinator's store does (Wait answers at once: the keys the
// tests read are set first).
class RefusingRendezvous final : public v1::RendezvousService::Service {
 public:
  void Refuse(int calls, grpc::StatusCode code) {
    absl::MutexLock lock(&mu_);
    refusals_ = calls;
    refusal_ = code;
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  grpc::Status Set(grpc::ServerContext*, const v1::RendezvousSetRequest* request,
                   v1::RendezvousSetResponse*) override {
    absl::MutexLock lock(&mu_);
    if (RefusedLocked()) return grpc::Status(refusal_, "overloaded");
    values_[request->key()] = request->value();
    return grpc::Status::OK;
  }
  grpc::Status Get(grpc::ServerContext*, const v1::RendezvousGetRequest* request,
                   v1::RendezvousGetResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (RefusedLocked()) return grpc::Status(refusal_, "overloaded");
    response->set_value(values_[request->key()]);
    return grpc::Status::OK;
  }
  // Each read's part of its key's value (the tests read within their values).
  grpc::Status GetMany(grpc::ServerContext*, const v1::RendezvousGetManyRequest* request,
                       v1::RendezvousGetManyResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (RefusedLocked()) return grpc::Status(refusal_, "overloaded");
    reads_per_call_.push_back(request->reads_size());
    for (const v1::RendezvousRead& read : request->reads()) {
      const std::string& value = values_[read.key()];
      response->add_values(read.length() == 0 ? value.substr(read.offset())
                                              : value.substr(read.offset(), read.length()));
    }
    return grpc::Status::OK;
  }
  std::vector<int> reads_per_call() const {
    absl::MutexLock lock(&mu_);
    return reads_per_call_;
  }
  grpc::Status Wait(grpc::ServerContext*, const v1::RendezvousWaitRequest*,
                    v1::RendezvousWaitResponse*) override {
    absl::MutexLock lock(&mu_);
    if (RefusedLocked()) return grpc::Status(refusal_, "overloaded");
    return grpc::Status::OK;
  }
  grpc::Status Add(grpc::ServerContext*, const v1::RendezvousAddRequest* request,
                   v1::RendezvousAddResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (RefusedLocked()) return grpc::Status(refusal_, "overloaded");
    counter_ += request->delta();
    response->set_value(counter_);
    return grpc::Status::OK;
  }

 private:
  bool RefusedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++calls_;
    if (refusals_ == 0) return false;
    --refusals_;
    return true;
  }

  mutable absl::Mutex mu_;
  int refusals_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::StatusCode refusal_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::OK;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  std::vector<int> reads_per_call_ ABSL_GUARDED_BY(mu_);
  int64_t counter_ ABSL_GUARDED_BY(mu_) = 0;
};

class GrpcRendezvousStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    store_ = std::make_unique<GrpcRendezvousStore>(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()),
        v1::RendezvousScope(), std::chrono::seconds(30), nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  RefusingRendezvous service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcRendezvousStore> store_;
};

// An overloaded coordinator ran none of the calls it refused: each is sent again until
// served, counters included, and each counts once.
TEST_F(GrpcRendezvousStoreTest, CallsRefusedForOverloadAreSentAgain) {
  service_.Refuse(3, grpc::StatusCode::RESOURCE_EXHAUSTED);
  store_->set("k", {'v'});
  EXPECT_EQ(service_.calls(), 4);
  service_.Refuse(2, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(store_->get("k"), std::vector<char>{'v'});
  service_.Refuse(2, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(store_->add("n", 5), 5);
}

// An unreachable coordinator may have run a call before its reply was lost: reads and
// writes are sent again, a counter is not (it would count twice).
TEST_F(GrpcRendezvousStoreTest, OnlyCallsThatMayRunTwiceAreSentAgainWhenUnavailable) {
  service_.Refuse(2, grpc::StatusCode::UNAVAILABLE);
  store_->set("k", {'v'});
  EXPECT_EQ(service_.calls(), 3);
  service_.Refuse(1, grpc::StatusCode::UNAVAILABLE);
  EXPECT_THROW(store_->add("n", 1), gloo::IoException);
  EXPECT_EQ(store_->add("n", 1), 1);  // the refused one did not count
}

// A wait only reads: one refused as busy, or cut off (a coordinator restarting), is asked
// again within its deadline; another refusal is the caller's.
TEST_F(GrpcRendezvousStoreTest, AWaitRefusedOrCutOffIsAskedAgain) {
  service_.Refuse(2, grpc::StatusCode::UNAVAILABLE);
  store_->wait({"k"});
  EXPECT_EQ(service_.calls(), 3);
  service_.Refuse(2, grpc::StatusCode::RESOURCE_EXHAUSTED);
  store_->wait({"k"});
  EXPECT_EQ(service_.calls(), 6);
  service_.Refuse(1, grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THROW(store_->wait({"k"}), gloo::IoException);
}

// A full mesh's reads of a large world go in calls of kReadsPerCall reads, in order, each
// sent again while the coordinator is overloaded.
TEST_F(GrpcRendezvousStoreTest, ManyReadsGoInBoundedCallsInOrder) {
  const size_t reads = GrpcRendezvousStore::kReadsPerCall + 3;
  std::vector<StoreRead> asked;
  for (size_t i = 0; i < reads; ++i) {
    const std::string key = "k" + std::to_string(i);
    store_->set(key, {'a', static_cast<char>('0' + i % 10), 'b'});
    asked.push_back(StoreRead{key, 1, 1});
  }
  service_.Refuse(1, grpc::StatusCode::RESOURCE_EXHAUSTED);
  const std::vector<std::vector<char>> values = store_->multiGet(asked);
  ASSERT_EQ(values.size(), reads);
  for (size_t i = 0; i < reads; ++i) {
    EXPECT_EQ(values[i], std::vector<char>{static_cast<char>('0' + i % 10)}) << "read " << i;
  }
  EXPECT_EQ(service_.reads_per_call(),
            (std::vector<int>{static_cast<int>(GrpcRendezvousStore::kReadsPerCall), 3}));
}

// Other refusals are the caller's to handle: thrown at once.
TEST_F(GrpcRendezvousStoreTest, OtherRefusalsAreNotSentAgain) {
  service_.Refuse(1, grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THROW(store_->set("k", {'v'}), gloo::IoException);
  EXPECT_EQ(service_.calls(), 1);
}

}  // namespace
}  // namespace shardwise
