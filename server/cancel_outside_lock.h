#ifndef SHARDWISE_SERVER_CANCEL_OUTSIDE_LOCK_H_
#define SHARDWISE_SERVER_CANCEL_OUTSIDE_LOCK_H_

// A callback stream's call cancelled from outside its reactions (a stalled write given
// up), against the stream's own Finish. TryCancel runs outside the owner's mutex: nothing
// in gRPC's API promises it runs no reaction inline, and the reactions take that mutex.
// A reaction that would Finish meanwhile must not: Finish may end the call, and the
// context TryCancel is using with it. So the Finish is held, and done once TryCancel has
// returned; the call then ends CANCELLED, as TryCancel's contract asks. The owner's mutex
// guards this state; its users are WatchHub's streams and SessionStream.
//
//   { lock; if (nothing to cancel || !cancel.Begin()) return; }
//   context->TryCancel();
//   lock; if (cancel.End()) Finish now;
//
// and, where the owner would Finish: if (cancel.HoldsFinish()) return;

#include <utility>

namespace shardwise {

class CancelOutsideLock {
 public:
  // Starts a cancel; false when one is under way already.
  bool Begin() { return !std::exchange(cancelling_, true); }
  // Whether a Finish asked for now must wait for the cancel under way (End then says so).
  bool HoldsFinish() {
    if (!cancelling_) return false;
    finish_held_ = true;
    return true;
  }
  // Once TryCancel has returned: whether a Finish was held, which the owner does now.
  bool End() {
    cancelling_ = false;
    return std::exchange(finish_held_, false);
  }

 private:
  bool cancelling_ = false;
  bool finish_held_ = false;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_CANCEL_OUTSIDE_LOCK_H_
