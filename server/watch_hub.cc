#include "server/watch_hub.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "contracts/job_state.h"
#include "grpcpp/server_context.h"
#include "server/cancel_outside_lock.h"

namespace shardwise {

// One watcher. gRPC calls its reactions; the hub's thread decides what it writes.
class WatchHub::Stream final : public grpc::ServerWriteReactor<v1::Job>,
                               public std::enable_shared_from_this<Stream> {
 public:
  Stream(WatchHub* hub, std::string job_id, std::string watcher, StillAllowed still_allowed,
         grpc::CallbackServerContext* context)
      : hub_(hub),
        job_id_(std::move(job_id)),
        watcher_(std::move(watcher)),
        still_allowed_(std::move(still_allowed)),
        context_(context) {}

  const std::string& job_id() const { return job_id_; }
  const std::string& watcher() const { return watcher_; }

  // OK, or why the watcher may no longer watch.
  absl::Status Allowed() const { return still_allowed_ ? still_allowed_() : absl::OkStatus(); }

  // Called by the hub: writes `job` at `version` unless a write is in flight (then the
  // hub is asked again once it is done) or the version was written already.
  void Offer(std::shared_ptr<const v1::Job> job, uint64_t version, absl::Time now) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (writing_) {
      again_ = true;
      return;
    }
    if (version == written_version_) return;
    written_version_ = version;
    last_ = IsTerminal(job->state());
    job_ = std::move(job);
    writing_ = true;
    write_started_ = now;
    StartWrite(job_.get());
  }

  // Cancels the call if a write started before `deadline` is still waiting for its
  // client; whether it did.
  bool CancelIfWritingSince(absl::Time deadline) {
    {
      absl::MutexLock lock(&mu_);
      if (!writing_ || finished_ || context_ == nullptr || write_started_ >= deadline ||
          !cancel_.Begin()) {
        return false;
      }
    }
    // Not under mu_: gRPC may run OnCancel and the write's OnWriteDone (not ok) inline.
    context_->TryCancel();
    absl::MutexLock lock(&mu_);
    if (cancel_.End()) FinishLocked();
    return true;
  }

  // Ends the stream with `status` once no write is in flight.
  void End(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    ending_ = status;
    if (!writing_) FinishLocked();
  }

  void OnWriteDone(bool ok) override {
    bool again = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) ending_ = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      if (last_ && ok) ending_ = grpc::Status::OK;  // the job ended: so does the watch
      if (ending_.has_value()) {
        FinishLocked();
        return;
      }
      again = std::exchange(again_, false);
    }
    if (again) hub_->Ready(shared_from_this());
  }

  void OnCancel() override { End(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled")); }

  // May run inline in Finish(), under mu_: takes no lock of its own.
  void OnDone() override {
    std::shared_ptr<Stream> self = std::move(self_);
    hub_->Remove(self);
  }

  std::shared_ptr<Stream> self_;  // gRPC's reference, dropped in OnDone

 private:
  void FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (cancel_.HoldsFinish()) return;  // CancelIfWritingSince finishes after TryCancel
    finished_ = true;
    std::shared_ptr<Stream> keep = self_;  // Finish may run OnDone inline
    Finish(*ending_);
  }

  WatchHub* const hub_;
  const std::string job_id_;
  const std::string watcher_;
  const StillAllowed still_allowed_;
  grpc::CallbackServerContext* const context_;  // gRPC's, valid until OnDone
  // mu_ also serialises the calls into gRPC (StartWrite, Finish, TryCancel).
  absl::Mutex mu_;
  // The version being written, shared with the job's other watchers.
  std::shared_ptr<const v1::Job> job_ ABSL_GUARDED_BY(mu_);
  uint64_t written_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time write_started_ ABSL_GUARDED_BY(mu_);
  bool again_ ABSL_GUARDED_BY(mu_) = false;  // the job changed during the write
  bool last_ ABSL_GUARDED_BY(mu_) = false;   // the version being written is final
  std::optional<grpc::Status> ending_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  CancelOutsideLock cancel_ ABSL_GUARDED_BY(mu_);  // CancelIfWritingSince's
};

WatchHub::WatchHub(JobManager* jobs, size_t max_watches, size_t max_per_watcher,
                   absl::Duration write_timeout, const Clock* clock)
    : jobs_(jobs),
      max_watches_(max_watches),
      max_per_watcher_(max_per_watcher),
      write_timeout_(write_timeout),
      clock_(*clock),
      thread_([this] { Run(); }) {}

WatchHub::~WatchHub() {
  Shutdown();
  if (thread_.joinable()) thread_.join();
}

void WatchHub::Shutdown() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

size_t WatchHub::watches() const {
  absl::MutexLock lock(&mu_);
  return watches_;
}

absl::StatusOr<grpc::ServerWriteReactor<v1::Job>*> WatchHub::Watch(
    const std::string& job_id, const std::string& watcher, StillAllowed still_allowed,
    grpc::CallbackServerContext* context) {
  auto stream = std::make_shared<Stream>(this, job_id, watcher, std::move(still_allowed), context);
  {
    absl::MutexLock lock(&mu_);
    if (watches_ >= max_watches_) {
      return absl::ResourceExhaustedError(
          "the coordinator serves as many watches as it allows (--max_watches); try again");
    }
    if (!watcher.empty()) {
      size_t& held = per_watcher_[watcher];
      if (held >= max_per_watcher_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            watcher, " holds ", held,
            " watches, as many as one principal may (--max_watches_per_principal); end one, "
            "or try again"));
      }
      ++held;
    }
    // gRPC's reference, set before the hub's thread can see the stream (and end it).
    stream->self_ = stream;
    ++watches_;
    watchers_[job_id].insert(stream);
  }
  Ready(stream);  // the job as it is now, first
  return stream.get();
}

void WatchHub::Ready(std::shared_ptr<Stream> stream) {
  absl::MutexLock lock(&mu_);
  ready_.push_back(std::move(stream));
}

void WatchHub::Remove(const std::shared_ptr<Stream>& stream) {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(stream->job_id());
  if (it == watchers_.end()) return;
  const size_t removed = it->second.erase(stream);
  watches_ -= removed;
  if (it->second.empty()) watchers_.erase(it);
  if (removed == 0 || stream->watcher().empty()) return;
  auto held = per_watcher_.find(stream->watcher());
  if (held != per_watcher_.end() && --held->second == 0) per_watcher_.erase(held);
}

void WatchHub::Serve(const std::shared_ptr<Stream>& stream, Versions* versions) {
  if (const absl::Status allowed = stream->Allowed(); !allowed.ok()) {
    stream->End(ToGrpcStatus(allowed));
    return;
  }
  auto [it, fresh] = versions->try_emplace(stream->job_id());
  Version& newest = it->second;
  if (fresh) {
    auto job = jobs_->Get(stream->job_id(), &newest.version);
    newest.job = job.ok() ? absl::StatusOr<std::shared_ptr<const v1::Job>>(
                                std::make_shared<const v1::Job>(*std::move(job)))
                          : job.status();
  }
  if (!newest.job.ok()) {
    stream->End(ToGrpcStatus(newest.job.status()));
    return;
  }
  stream->Offer(*newest.job, newest.version, clock_.Now());
}

void WatchHub::Recheck() {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [job_id, watchers] : watchers_) {
      streams.insert(streams.end(), watchers.begin(), watchers.end());
    }
  }
  const absl::Time stalled_before = clock_.Now() - write_timeout_;
  for (const auto& stream : streams) {
    if (const absl::Status allowed = stream->Allowed(); !allowed.ok()) {
      stream->End(ToGrpcStatus(allowed));
    } else if (stream->CancelIfWritingSince(stalled_before)) {
      LogWarning(
          LogContext().Job(stream->job_id()),
          absl::StrCat("cancelled a watch",
                       stream->watcher().empty() ? "" : " of " + stream->watcher(),
                       ": its client read no update for ", absl::FormatDuration(write_timeout_)));
    }
  }
}

void WatchHub::Run() {
  // A quiet job's watchers are asked again this often, so a revoked token's watch ends
  // within it even without an update.
  constexpr absl::Duration kRecheckInterval = absl::Seconds(2);
  absl::Time next_recheck = clock_.Now() + kRecheckInterval;
  while (true) {
    if (clock_.Now() >= next_recheck) {
      Recheck();
      next_recheck = clock_.Now() + kRecheckInterval;
    }
    // Changes wake the hub; streams that finished a write and have a newer version to
    // send wait at most this long.
    const std::vector<std::string> changed = jobs_->ChangedJobs(absl::Milliseconds(20));
    std::vector<std::shared_ptr<Stream>> to_serve;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      to_serve.assign(ready_.begin(), ready_.end());
      ready_.clear();
      for (const std::string& job_id : changed) {
        auto it = watchers_.find(job_id);
        if (it == watchers_.end()) continue;
        to_serve.insert(to_serve.end(), it->second.begin(), it->second.end());
      }
    }
    // Each job read once a turn, however many watch it: its watchers share that copy.
    Versions versions;
    for (const auto& stream : to_serve) Serve(stream, &versions);
  }
}

}  // namespace shardwise
