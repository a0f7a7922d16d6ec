#include "worker/attempt_runner.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "worker/comm/grpc_rendezvous_store.h"

namespace shardwise {

AttemptRunner::AttemptRunner(std::shared_ptr<grpc::Channel> channel,
                             const v1::Assignment& assignment, const DataPlaneOptions& data_plane,
                             Reporter report)
    : channel_(std::move(channel)),
      assignment_(assignment),
      data_plane_(data_plane),
      report_(std::move(report)),
      thread_([this] { Run(); }) {}

AttemptRunner::~AttemptRunner() {
  Abort("worker shutting down");
  thread_.join();
}

void AttemptRunner::Abort(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (abort_reason_.empty()) abort_reason_ = reason;
  abort_ = true;
}

void AttemptRunner::Report(v1::AttemptPhase phase, const std::string& message) {
  v1::AttemptReport report;
  report.set_job_id(assignment_.job_id());
  report.set_attempt(assignment_.attempt());
  report.set_rank(assignment_.rank());
  report.set_phase(phase);
  report.set_message(message);
  report.mutable_progress()->set_total_steps(assignment_.spec().steps());
  report.mutable_progress()->set_phase(phase == v1::COMPLETED ? "completed" : "bootstrap");
  report_(report);
}

void AttemptRunner::Run() {
  const int rank = assignment_.rank();
  const int size = assignment_.world_size();
  DataPlaneOptions options = data_plane_;
  if (assignment_.collective_timeout_ms() > 0) {
    options.timeout = std::chrono::milliseconds(assignment_.collective_timeout_ms());
  }
  std::fprintf(stderr, "worker: %s attempt %d: rank %d of %d joining the data plane\n",
               job_id().c_str(), attempt(), rank, size);

  auto fail = [&](const absl::Status& status) {
    std::string message(status.message());
    if (abort_) {
      absl::MutexLock lock(&mu_);
      message = absl::StrCat("aborted: ", abort_reason_);
    }
    std::fprintf(stderr, "worker: %s attempt %d rank %d: %s\n", job_id().c_str(), attempt(),
                 rank, message.c_str());
    Report(v1::ABORTED, message);
    done_ = true;
  };

  GrpcRendezvousStore store(channel_, assignment_.job_id(), assignment_.attempt(),
                            options.timeout, &abort_);
  auto context = ConnectGlooContext(store, rank, size, options);
  if (!context.ok()) return fail(context.status());
  auto sum = VerifyDataPlane(*context);
  if (!sum.ok()) return fail(sum.status());
  if (abort_) return fail(absl::AbortedError("aborted"));
  Report(v1::JOINED, absl::StrCat("all-reduce of ranks gave ", *sum));

  // The FSDP training runtime is not part of this build yet (docs/architecture.md,
  // "Status"): the attempt ends after the data-plane bootstrap and says so.
  Report(v1::COMPLETED,
         absl::StrCat("data plane verified on ", size, " ranks (all-reduce of ranks = ", *sum,
                      "); the FSDP training runtime is not built yet, so 0 of ",
                      assignment_.spec().steps(), " steps ran"));
  done_ = true;
}

}  // namespace shardwise
