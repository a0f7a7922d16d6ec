#ifndef SHARDWISE_WORKER_FSDP_FLAT_UNIT_H_
#define SHARDWISE_WORKER_FSDP_FLAT_UNIT_H_

// One FSDP unit on one rank: its flat parameter's shard, its gradient shard, and while it
// is unsharded, the full (all-gathered) parameters and their gradient.
//
// Ownership across threads: the training thread owns a unit, but for two hand-offs
// that a handle orders. An all-gather task fills `full` (allocated by the training
// thread at issue) and reports through `unsharding`; the training thread reads `full`
// only after waiting on it: until the all-gather is enqueued, then on the device for the
// fence it gives (CommThread::Handle::WaitStarted). At post-backward the unsharded
// gradient moves to the reduction thread, which adds into `shard_grad` and, with an
// optimizer in backward, updates `shard`; with DDP's mixed-precision hook an upcast thread
// adds into `shard_grad` and then reshards the unit (frees `full`, clears `unsharded`).
// The training thread touches `shard`, `shard_grad`, `full` and `unsharded` again only
// after the end of backward has drained those threads.

#include <cstdint>

#include "contracts/fsdp_layout.h"
#include "worker/comm/comm_thread.h"
#include "worker/runtime/memory.h"

namespace shardwise::fsdp {

struct FlatUnit {
  UnitLayout layout;
  int index = 0;
  int64_t padded_numel = 0;
  int64_t shard_numel = 0;
  Buffer shard;       // FP32 master parameters [shard_numel]
  Buffer shard_grad;  // reduced gradients [shard_numel]
  Buffer full;        // unsharded parameters [padded_numel], when they need their own copy,
                      // in the device's storage type (FP32, or the job's param_dtype)
  Buffer full_grad;   // unsharded gradients [padded_numel], from pre-backward until reduced
  bool unsharded = false;
  CommThread::Handle unsharding;  // an all-gather issued (prefetched) and not yet waited on
  // Its post-backward ran in this micro-step: it needs no more unsharding in this pass,
  // so nothing prefetches it (FSDP prefetches only what the pass still needs).
  bool backward_done = false;
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_FLAT_UNIT_H_
