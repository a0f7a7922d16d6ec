#ifndef SHARDWISE_WORKER_DAEMON_REPORT_OUTBOX_H_
#define SHARDWISE_WORKER_DAEMON_REPORT_OUTBOX_H_

// The reports of the worker's current attempt that must reach the coordinator even if
// it restarts: while the session is down, reports are held (the newest progress report
// only, every other one in order, at most kMaxHeld); the attempt's final report
// (COMPLETED or ABORTED) is kept even once sent, because a coordinator that crashed may
// not have acted on it. When a new session adopts the attempt (the coordinator re-attached
// it), Release hands back what to send, in order; when it does not, the held reports are
// dropped (the attempt is over for the coordinator).
//
// Thread-safety: thread-safe.

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class ReportOutbox {
 public:
  static constexpr size_t kMaxHeld = 1024;

  // A new attempt: what was kept of the previous one is forgotten.
  void StartAttempt();
  // `report` reached the session.
  void Sent(const v1::AttemptReport& report);
  // `report` could not be sent (no session, or the write failed).
  void Hold(const v1::AttemptReport& report);
  // What to send on a new session: everything held and the final report, if the
  // coordinator re-attached the attempt; nothing otherwise. Either way nothing stays held.
  std::vector<v1::AttemptReport> Release(bool reattached);
  // Release, each report written with `write` in order; the first it could not write (the
  // session broke again) and those after it are held again, for the next session.
  void Resend(bool reattached, absl::FunctionRef<bool(const v1::AttemptReport&)> write);
  // The attempt's final report has been produced (sent or held).
  bool ended() const;
  size_t held() const;

 private:
  static bool IsFinal(const v1::AttemptReport& report);

  mutable absl::Mutex mu_;
  std::deque<v1::AttemptReport> held_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::AttemptReport> final_ ABSL_GUARDED_BY(mu_);
  bool final_held_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_REPORT_OUTBOX_H_
