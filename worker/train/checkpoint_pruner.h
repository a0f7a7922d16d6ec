#ifndef SHARDWISE_WORKER_TRAIN_CHECKPOINT_PRUNER_H_
#define SHARDWISE_WORKER_TRAIN_CHECKPOINT_PRUNER_H_

// output.keep_checkpoints on the leader: after each complete checkpoint, the job's older
// ones beyond the newest K are removed (fsdp::RemoveOlderCheckpoints) on a thread of the
// pruner's own, since unlinking large shards on network storage may take longer than a
// peer is waited for in a step. Requests coalesce: one made while a removal runs replaces
// any waiting one (the newer step's removal covers the older's), so the removals never
// fall behind and the last request always runs. What cannot be removed is logged, never
// the job's failure (the new checkpoint is complete; the next request tries again).
//
// Thread-safety: After may be called from any thread; the destructor waits for the
// removal running and the one waiting.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/fsdp/checkpoint.h"

namespace shardwise {

class CheckpointPruner {
 public:
  // What removes the checkpoints older than a step beyond `keep`: how many it removed.
  using Removal = std::function<absl::StatusOr<int>(int64_t step)>;

  // Keeps `keep` checkpoints of `author`'s job in `dir`; 0 keeps every one (After does
  // nothing, and no thread is started).
  CheckpointPruner(const std::string& dir, const fsdp::CheckpointAuthor& author, int keep);
  // Removes with `removal` (the constructor above: fsdp::RemoveOlderCheckpoints in `dir`).
  CheckpointPruner(fsdp::CheckpointAuthor author, int keep, Removal removal);
  ~CheckpointPruner();
  CheckpointPruner(const CheckpointPruner&) = delete;
  CheckpointPruner& operator=(const CheckpointPruner&) = delete;

  // The checkpoint of `step` is complete: the older ones beyond `keep` are to go.
  void After(int64_t step);

 private:
  void Loop();
  void Remove(int64_t step) const;

  const fsdp::CheckpointAuthor author_;
  const int keep_;
  const Removal removal_;
  absl::Mutex mu_;
  std::optional<int64_t> waiting_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // not started: removals run in After, on the caller's thread
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_CHECKPOINT_PRUNER_H_
