#include "worker/train/checkpoint_pruner.h"

#include <new>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace shardwise {

CheckpointPruner::CheckpointPruner(const std::string& dir, const fsdp::CheckpointAuthor& author,
                                   int keep)
    : CheckpointPruner(author, keep, [dir, author, keep](int64_t step) {
        return fsdp::RemoveOlderCheckpoints(dir, step, author, keep);
      }) {}

CheckpointPruner::CheckpointPruner(fsdp::CheckpointAuthor author, int keep, Removal removal)
    : author_(std::move(author)), keep_(keep), removal_(std::move(removal)) {
  if (keep_ <= 0) return;
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& error) {
    LogWarning(LogContext().Job(author_.job_id).Attempt(author_.attempt),
               absl::StrCat("removing old checkpoints on the training thread: no thread of its "
                            "own (",
                            error.what(), ")"));
  }
}

CheckpointPruner::~CheckpointPruner() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void CheckpointPruner::After(int64_t step) {
  if (keep_ <= 0) return;
  if (!thread_.joinable()) {
    Remove(step);
    return;
  }
  absl::MutexLock lock(&mu_);
  waiting_ = step;
}

void CheckpointPruner::Loop() {
  for (;;) {
    int64_t step = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CheckpointPruner* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->waiting_.has_value() || self->stopping_;
          },
          this));
      if (!waiting_.has_value()) return;  // stopping, nothing left
      step = *std::exchange(waiting_, std::nullopt);
    }
    Remove(step);
  }
}

void CheckpointPruner::Remove(int64_t step) const {
  absl::StatusOr<int> removed;
  try {
    removed = removal_(step);
  } catch (const std::bad_alloc&) {  // not the daemon's end: the next request tries again
    removed = absl::ResourceExhaustedError("out of memory");
  }
  const LogContext log = LogContext().Job(author_.job_id).Attempt(author_.attempt);
  if (!removed.ok()) {
    LogWarning(
        log, absl::StrCat("removing checkpoints older than step ", step,
                          " (output.keep_checkpoints ", keep_, "): ", removed.status().ToString()));
  } else if (*removed > 0) {
    LogInfo(log, absl::StrCat("removed ", *removed, " checkpoints older than step ", step,
                              " (output.keep_checkpoints ", keep_, ")"));
  }
}

}  // namespace shardwise
