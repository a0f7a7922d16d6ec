#include "worker/comm/grpc_rendezvous_store.h"

#include <algorithm>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "grpcpp/client_context.h"
#include "worker/runtime/critical_path.h"

namespace shardwise {
namespace {

[[noreturn]] void Throw(const std::string& what, const grpc::Status& status) {
  throw gloo::IoException(absl::StrCat("rendezvous ", what, ": ", status.error_message(),
                                       " (gRPC code ", status.error_code(), ")"));
}

// Each RPC is bounded so that a coordinator that vanished cannot hang a worker.
void SetDeadline(grpc::ClientContext* context, std::chrono::milliseconds budget) {
  context->set_deadline(std::chrono::system_clock::now() + budget + std::chrono::seconds(5));
}

// An overloaded coordinator answers RESOURCE_EXHAUSTED without running the call (its
// synchronous pool is full: a full mesh's W^2 reads at bootstrap can do that), so any
// call may be sent again. UNAVAILABLE (no connection, a coordinator restarting) may come
// after the call ran, so only calls that are the same when run twice are sent again.
bool Retryable(const grpc::Status& status, bool idempotent) {
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         (idempotent && status.error_code() == grpc::StatusCode::UNAVAILABLE);
}

}  // namespace

grpc::Status GrpcRendezvousStore::Retrying(
    bool idempotent, const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
  const auto give_up = std::chrono::steady_clock::now() + timeout_;
  std::chrono::milliseconds backoff(50);
  absl::BitGen jitter;
  while (true) {
    grpc::ClientContext context;
    SetDeadline(&context, std::chrono::milliseconds(0));
    grpc::Status status = call(&context);
    if (status.ok() || !Retryable(status, idempotent)) return status;
    if ((abort_ != nullptr && abort_->load()) ||
        std::chrono::steady_clock::now() + backoff > give_up) {
      return status;
    }
    // Jittered, so that the ranks refused together do not come back together.
    std::this_thread::sleep_for(std::chrono::milliseconds(
        absl::Uniform<int64_t>(jitter, backoff.count() / 2, backoff.count() + 1)));
    backoff = std::min<std::chrono::milliseconds>(2 * backoff, std::chrono::seconds(2));
  }
}

GrpcRendezvousStore::GrpcRendezvousStore(const std::shared_ptr<grpc::Channel>& channel,
                                         v1::RendezvousScope scope,
                                         std::chrono::milliseconds timeout,
                                         const std::atomic<bool>* abort)
    : stub_(v1::RendezvousService::NewStub(channel)),
      scope_(std::move(scope)),
      timeout_(timeout),
      abort_(abort) {}

void GrpcRendezvousStore::set(const std::string& key, const std::vector<char>& data) {
  CountCoordinatorCall();
  v1::RendezvousSetRequest request;
  *request.mutable_scope() = Scope();
  request.set_key(key);
  request.set_value(std::string(data.begin(), data.end()));
  v1::RendezvousSetResponse response;
  const grpc::Status status = Retrying(/*idempotent=*/true, [&](grpc::ClientContext* context) {
    return stub_->Set(context, request, &response);
  });
  if (!status.ok()) Throw(absl::StrCat("set '", key, "'"), status);
}

std::vector<char> GrpcRendezvousStore::get(const std::string& key) {
  CountCoordinatorCall();
  wait({key}, timeout_);
  v1::RendezvousGetRequest request;
  *request.mutable_scope() = Scope();
  request.set_key(key);
  v1::RendezvousGetResponse response;
  const grpc::Status status = Retrying(/*idempotent=*/true, [&](grpc::ClientContext* context) {
    return stub_->Get(context, request, &response);
  });
  if (!status.ok()) Throw(absl::StrCat("get '", key, "'"), status);
  return std::vector<char>(response.value().begin(), response.value().end());
}

std::vector<std::vector<char>> GrpcRendezvousStore::multiGet(const std::vector<StoreRead>& reads) {
  std::vector<std::vector<char>> values;
  values.reserve(reads.size());
  for (size_t first = 0; first < reads.size(); first += kReadsPerCall) {
    const size_t end = std::min(reads.size(), first + kReadsPerCall);
    auto part = GetMany(reads, first, end);
    for (std::vector<char>& value : part) values.push_back(std::move(value));
  }
  return values;
}

std::vector<std::vector<char>> GrpcRendezvousStore::GetMany(const std::vector<StoreRead>& reads,
                                                            size_t first, size_t end) {
  CountCoordinatorCall();
  v1::RendezvousGetManyRequest request;
  *request.mutable_scope() = Scope();
  for (size_t i = first; i < end; ++i) {
    v1::RendezvousRead* read = request.add_reads();
    read->set_key(reads[i].key);
    read->set_offset(static_cast<int64_t>(reads[i].offset));
    read->set_length(static_cast<int64_t>(reads[i].length));
  }
  v1::RendezvousGetManyResponse response;
  const grpc::Status status = Retrying(/*idempotent=*/true, [&](grpc::ClientContext* context) {
    return stub_->GetMany(context, request, &response);
  });
  if (!status.ok()) {
    Throw(absl::StrCat("read ", end - first, " keys from '", reads[first].key, "'"), status);
  }
  if (static_cast<size_t>(response.values_size()) != end - first) {
    throw gloo::IoException(absl::StrCat("rendezvous: asked for ", end - first,
                                         " reads, the coordinator answered ",
                                         response.values_size(), " values"));
  }
  std::vector<std::vector<char>> values;
  values.reserve(end - first);
  for (const std::string& value : response.values())
    values.emplace_back(value.begin(), value.end());
  return values;
}

void GrpcRendezvousStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GrpcRendezvousStore::wait(const std::vector<std::string>& keys,
                               const std::chrono::milliseconds& timeout) {
  CountCoordinatorCall();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // In slices, so that an abort of the attempt is noticed within one.
  constexpr std::chrono::milliseconds kSlice(1000);
  std::chrono::milliseconds backoff(50);
  absl::BitGen jitter;
  while (true) {
    if (abort_ != nullptr && abort_->load()) throw gloo::IoException("rendezvous: attempt aborted");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds(0)) {
      throw gloo::IoException(
          absl::StrCat("rendezvous: peers did not arrive within ", timeout.count(), " ms"));
    }
    v1::RendezvousWaitRequest request;
    *request.mutable_scope() = Scope();
    for (const std::string& key : keys) request.add_keys(key);
    request.set_timeout_ms(std::max<int64_t>(1, std::min(left, kSlice).count()));
    v1::RendezvousWaitResponse response;
    grpc::ClientContext context;
    SetDeadline(&context, std::min(left, kSlice));
    grpc::Status status = stub_->Wait(&context, request, &response);
    if (status.ok()) return;
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) continue;
    // A wait only reads: refused as busy or cut off, it is asked again within its deadline.
    if (!Retryable(status, /*idempotent=*/true)) Throw("wait", status);
    std::this_thread::sleep_for(
        std::min(left, std::chrono::milliseconds(absl::Uniform<int64_t>(jitter, backoff.count() / 2,
                                                                        backoff.count() + 1))));
    backoff = std::min<std::chrono::milliseconds>(2 * backoff, std::chrono::seconds(1));
  }
}

int64_t GrpcRendezvousStore::add(const std::string& key, int64_t delta) {
  CountCoordinatorCall();
  v1::RendezvousAddRequest request;
  *request.mutable_scope() = Scope();
  request.set_key(key);
  request.set_delta(delta);
  v1::RendezvousAddResponse response;
  // Not idempotent: an Add that ran before its reply was lost would count twice.
  const grpc::Status status = Retrying(/*idempotent=*/false, [&](grpc::ClientContext* context) {
    return stub_->Add(context, request, &response);
  });
  if (!status.ok()) Throw(absl::StrCat("add '", key, "'"), status);
  return response.value();
}

}  // namespace shardwise
