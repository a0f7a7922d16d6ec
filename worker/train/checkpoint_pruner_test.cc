#include "worker/train/checkpoint_pruner.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

// A removal that records its steps and holds the first one until released, so that a
// test makes its requests while a removal runs.
class HeldRemoval {
 public:
  CheckpointPruner::Removal Get() {
    return [this](int64_t step) -> absl::StatusOr<int> {
      {
        absl::MutexLock lock(&mu_);
        steps_.push_back(step);
      }
      if (!started_.HasBeenNotified()) {
        started_.Notify();
        release_.WaitForNotification();
      }
      return 1;
    };
  }
  void AwaitStarted() { started_.WaitForNotification(); }
  void Release() { release_.Notify(); }
  std::vector<int64_t> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }

 private:
  absl::Notification started_;
  absl::Notification release_;
  absl::Mutex mu_;
  std::vector<int64_t> steps_ ABSL_GUARDED_BY(mu_);
};

// Requests made while a removal runs coalesce into the newest; it runs, even when the
// pruner is destroyed right after it is made (the trainer's end).
TEST(CheckpointPruner, RequestsWhileARemovalRunsCoalesceIntoTheNewest) {
  HeldRemoval removal;
  {
    CheckpointPruner pruner(fsdp::CheckpointAuthor{"job-p", 1}, 2, removal.Get());
    pruner.After(10);
    removal.AwaitStarted();  // step 10's removal runs, held
    pruner.After(20);
    pruner.After(30);
    pruner.After(40);
    removal.Release();
  }  // waits for the removal running and the one waiting
  EXPECT_EQ(removal.steps(), (std::vector<int64_t>{10, 40}));
}

TEST(CheckpointPruner, KeepingEveryCheckpointRemovesNothing) {
  std::vector<int64_t> steps;
  {
    CheckpointPruner pruner(fsdp::CheckpointAuthor{"job-p", 1}, 0, [&](int64_t step) {
      steps.push_back(step);
      return absl::StatusOr<int>(0);
    });
    pruner.After(10);
  }
  EXPECT_TRUE(steps.empty());
}

// A removal that fails is logged, never the caller's failure: the next request runs.
TEST(CheckpointPruner, AFailedRemovalLeavesTheNextOneToRun) {
  absl::Mutex mu;
  std::vector<int64_t> steps;
  absl::Notification first_done;
  {
    CheckpointPruner pruner(fsdp::CheckpointAuthor{"job-p", 1}, 1,
                            [&](int64_t step) -> absl::StatusOr<int> {
                              absl::MutexLock lock(&mu);
                              steps.push_back(step);
                              if (step == 1) {
                                first_done.Notify();
                                return absl::UnavailableError("stale file handle");
                              }
                              return 2;
                            });
    pruner.After(1);
    first_done.WaitForNotification();
    pruner.After(2);
  }
  absl::MutexLock lock(&mu);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace shardwise
