#include "server/worker_service.h"

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/path_policy.h"
#include "common/printable_text.h"
#include "common/status_macros.h"
#include "common/worker_name.h"
#include "server/peer_identity.h"
#include "server/session_stream.h"

namespace shardwise {

namespace {

// Kept with the worker and shown by `get workers`: bounded lists of absolute, normal
// paths (the scheduler compares a job's paths with them as written: "/data/" would
// hold nothing), none empty (a worker bounding nothing on a side sends "/").
absl::Status CheckFolders(const v1::RegisterWorkerRequest& request) {
  if (!request.has_folders()) return absl::OkStatus();
  for (const auto& [field, roots] :
       {std::pair{"folders.input_roots", &request.folders().input_roots()},
        std::pair{"folders.output_roots", &request.folders().output_roots()}}) {
    if (roots->empty() || roots->size() > 2 * kMaxWorkerRoots) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", roots->size(), " folders; from 1 to ", 2 * kMaxWorkerRoots, " are allowed"));
    }
    for (const std::string& root : *roots) {
      RETURN_IF_ERROR(CheckPrintableField(field, root, 4096));
      RETURN_IF_ERROR(CheckAbsolutePath(field, root));
      if (LexicallyNormal(root, "/") != root) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": '", ShownValue(root),
                                                       "' is not a normal path (as '",
                                                       LexicallyNormal(root, "/"), "')"));
      }
    }
  }
  return absl::OkStatus();
}

// Shown by `get workers` and copied with every worker a scheduling pass offers.
absl::Status CheckGpu(const v1::GpuInfo& gpu) {
  for (const auto& [field, text] : {std::make_pair("gpu.name", &gpu.name()),
                                    std::make_pair("gpu.driver_version", &gpu.driver_version()),
                                    std::make_pair("gpu.nccl_version", &gpu.nccl_version()),
                                    std::make_pair("gpu.cudnn_version", &gpu.cudnn_version())}) {
    RETURN_IF_ERROR(CheckPrintableField(field, *text, 256));
  }
  if (gpu.memory_bytes() < 0 || gpu.index() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("gpu: memory_bytes ", gpu.memory_bytes(),
                                                   " and index ", gpu.index(),
                                                   " may not be negative"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRegistration(const v1::RegisterWorkerRequest& request) {
  if (!v1::DeviceKind_IsValid(request.device())) {
    return absl::InvalidArgumentError(absl::StrCat("device: unknown value ", request.device()));
  }
  if (request.device() == v1::CUDA && !request.has_gpu()) {
    return absl::InvalidArgumentError(
        "gpu: required when device is CUDA (the worker's GPU: name, memory, compute "
        "capability, driver and NCCL versions)");
  }
  if (request.device() != v1::CUDA && request.has_gpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu: set, but device is ", v1::DeviceKind_Name(request.device())));
  }
  RETURN_IF_ERROR(CheckWorkerName("name", request.name()));
  RETURN_IF_ERROR(CheckGpu(request.gpu()));
  RETURN_IF_ERROR(CheckFolders(request));
  if (request.features_size() > 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("features: ", request.features_size(), " names; at most 32"));
  }
  for (const std::string& feature : request.features()) {
    RETURN_IF_ERROR(CheckPrintableField("features", feature, 64));
  }
  if (request.cpu_threads() < 0 || request.memory_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cpu_threads ", request.cpu_threads(),
                                                   " and memory_bytes ", request.memory_bytes(),
                                                   " may not be negative"));
  }
  if (request.data_plane_version() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_plane_version: ", request.data_plane_version(), "; must be 0 or more"));
  }
  // Sent to the worker's peers as a probe target, and shown in events.
  return CheckPrintableField("data_probe_address", request.data_probe_address(), 300);
}

namespace {

// A worker that presents no certificate, where the coordinator authenticates its callers:
// the token of a worker (of that role alone: an admin's is for client calls), and the
// names its entry binds it to, if any.
absl::StatusOr<AllowedWorkerNames> WorkerTokenNames(const grpc::ServerContextBase& context,
                                                    TokenAuthenticator& tokens) {
  const absl::StatusOr<Principal> principal = tokens.Authenticate(context);
  if (!principal.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "workers must present a token of the worker role (the worker's --token_file; "
        "`shardwise token create --role=worker`) or, with the coordinator's --worker_ca, a "
        "client certificate: ",
        principal.status().message()));
  }
  // The worker role alone, an admin's included: a token is for what its role says.
  if (principal->role != Role::kWorker) {
    return absl::PermissionDeniedError(
        absl::StrCat(principal->name, " (", RoleName(principal->role),
                     ") may not register a worker: it takes a token of the worker role"));
  }
  if (!principal->worker_names.has_value()) return AllowedWorkerNames::Any();
  return AllowedWorkerNames::TokenEntry(principal->name, *principal->worker_names);
}

}  // namespace

absl::StatusOr<AllowedWorkerNames> WorkerIdentity(const grpc::ServerContextBase& context,
                                                  bool require_certificate,
                                                  TokenAuthenticator* tokens) {
  if (!require_certificate) {
    if (tokens != nullptr) return WorkerTokenNames(context, *tokens);
    return AllowedWorkerNames::Any();
  }
  const std::optional<std::string> name = CertificateName(context);
  if (!name.has_value()) {
    return absl::UnauthenticatedError(
        "workers must present a client certificate signed by the coordinator's --worker_ca "
        "(the worker's --tls_cert and --tls_key)");
  }
  RETURN_IF_ERROR(CheckWorkerName("the certificate's common name", *name));
  return AllowedWorkerNames::Certificate(*name);
}

bool WorkerServiceImpl::AdmitRegistration() {
  if (queued_registrations_.fetch_add(1) < options_.max_queued_registrations) return true;
  queued_registrations_.fetch_sub(1);
  return false;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RegisterWorker(
    grpc::CallbackServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status valid = ValidateRegistration(*request);
  auto allowed = WorkerIdentity(*context, options_.require_certificate, options_.tokens);
  if (valid.ok()) valid = allowed.status();
  std::string name = request->name();
  if (valid.ok() && name.empty()) name = allowed->certificate_name().value_or("");
  // Every nameless worker would be one worker, each registration taking the last's place.
  if (valid.ok() && name.empty()) {
    valid = absl::InvalidArgumentError(
        "name: empty; a worker without a certificate names itself (shardwise-worker --name)");
  }
  if (valid.ok()) valid = allowed->Check(AllowedWorkerNames::Call::kRegistration, name);
  if (valid.ok() && !AdmitRegistration()) {
    valid = absl::ResourceExhaustedError(
        absl::StrCat(options_.max_queued_registrations,
                     " registrations are waiting to be handled; retry (workers do)"));
  }
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  const absl::Time arrived = Clock::Real().Now();
  // The response lives until Finish; the controller may commit, so it runs on the
  // executor rather than on this gRPC thread.
  v1::RegisterWorkerRequest named = *request;
  named.set_name(name);
  executor_->Post([this, reactor, named = std::move(named), response, arrived] {
    queued_registrations_.fetch_sub(1);
    auto registered = controller_->RegisterWorker(named);
    if (registered.ok()) *response = std::move(*registered);
    if (metrics_ != nullptr) {
      metrics_->worker_message_seconds.With({"register"})
          .ObserveDuration(Clock::Real().Now() - arrived);
    }
    reactor->Finish(registered.ok() ? grpc::Status::OK : ToGrpcStatus(registered.status()));
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Session(
    grpc::CallbackServerContext* context) {
  auto allowed = WorkerIdentity(*context, options_.require_certificate, options_.tokens);
  if (!allowed.ok()) return SessionStream::Refuse(ToGrpcStatus(allowed.status()));
  // A session open when its token is revoked runs on: a pool's token is rotated while
  // its workers train (the new entry added, the Secret updated, the old entry removed),
  // and cutting their sessions would fail every running attempt. The next session (a
  // reconnect, a restart) needs the token in force.
  return SessionStream::Start(context, controller_, executor_, metrics_, *std::move(allowed),
                              options_.silent);
}

}  // namespace shardwise
