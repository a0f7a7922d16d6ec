#ifndef SHARDWISE_WORKER_COMM_LAUNCH_ORDER_H_
#define SHARDWISE_WORKER_COMM_LAUNCH_ORDER_H_

// One rank's order of collective launches across its communication threads.
//
// A rank's all-gathers and reductions run on two threads (comm_thread.h), each over a
// communicator of its own. Each thread keeps its own queue's order, but nothing orders
// the two threads' launches against each other, so in a backward one rank may launch
// unit 3's reduce-scatter before unit 1's all-gather and its peer the other way round.
// NCCL allows several communicators on one GPU only when every rank launches their
// collectives in one order (its kernels wait for their peers; two launched in different
// orders can each wait for the other's): NCCL >= 2.26 then keeps that host order on the
// device (NCCL_LAUNCH_ORDER_IMPLICIT, nccl_communicator.h).
//
// A LaunchOrder gives that order: a ticket per task, taken as the training thread queues
// it (program order, the same on every rank), and a thread may launch its task's
// collectives only on its ticket's turn, once every earlier ticket was released. A
// stream-ordered communicator returns once its collective is enqueued, so a turn lasts
// only the launch and the threads still overlap on the device.
//
// A ticket is released when its task's launch ended, failed, or was cancelled (its
// thread stopped before running it): a thread never waits on a task that will not run.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardwise {

class LaunchOrder {
 public:
  using Ticket = int64_t;

  // The next ticket, in the order of the calls.
  Ticket Take();
  // Whether every ticket before `ticket` was released.
  bool IsTurn(Ticket ticket);
  // Blocks until IsTurn(ticket).
  void AwaitTurn(Ticket ticket);
  // `ticket`'s launch is over (or will not happen): later turns may come.
  void Release(Ticket ticket);

  // For tests: waits up to `timeout` until `threads` threads wait in AwaitTurn; whether
  // they do.
  bool AwaitWaiters(int threads, absl::Duration timeout);

 private:
  bool IsTurnLocked(Ticket ticket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  Ticket next_ ABSL_GUARDED_BY(mu_) = 0;
  Ticket turn_ ABSL_GUARDED_BY(mu_) = 0;                  // the oldest ticket not yet released
  std::set<Ticket> released_early_ ABSL_GUARDED_BY(mu_);  // released after turn_
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_LAUNCH_ORDER_H_
