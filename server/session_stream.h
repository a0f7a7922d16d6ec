#ifndef SHARDWISE_SERVER_SESSION_STREAM_H_
#define SHARDWISE_SERVER_SESSION_STREAM_H_

// One worker's session (WorkerService.Session) on gRPC's callback API: no thread is held
// per worker. The stream reads one message at a time:
//   - the hello opens the session (through the JobController, on the executor); a
//     stream that sends none is ended by SilentSessions;
//   - a heartbeat is handled at once, on the gRPC thread that read it (it takes no lock
//     held across I/O: JobController::OnHeartbeat);
//   - a report or a hook acknowledgement is posted to the executor, since handling it may
//     commit to the state file; the next read starts only when it has been handled, so a
//     worker's messages are handled in order and each session has at most one queued.
// Downward, it is the worker's SessionOutbox: messages are written one after another,
// the rest queued. Close() cancels a write in flight rather than wait for it: the worker
// it waits on may read nothing ever again (the registry's Unread finds those).
//
// Lifetime: owned by shared pointers (the registry's, the executor's tasks') and by
// itself until gRPC calls OnDone; then the session is closed at the controller.
//
// Thread-safety: Push and Close may be called from any thread; gRPC calls the reactions.

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "proto/worker_service.pb.h"
#include "server/allowed_worker_names.h"
#include "server/cancel_outside_lock.h"
#include "server/coordinator_metrics.h"
#include "server/job_controller.h"
#include "server/serial_executor.h"
#include "server/session_outbox.h"
#include "server/silent_sessions.h"

namespace shardwise {

class SessionStream final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>,
      public SessionOutbox,
      public AwaitingHello,
      public std::enable_shared_from_this<SessionStream> {
 public:
  // Starts reading the worker's hello; gRPC owns the reactor it returns until OnDone.
  // `metrics` may be null. `allowed`: the names the hello may give (its certificate's, its
  // worker token's worker_names; PERMISSION_DENIED otherwise).
  // `context`: the call's, through which Close() cancels a write in flight. `silent`, if
  // given, waits for the hello.
  static grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Start(
      grpc::CallbackServerContext* context, JobController* controller, SerialExecutor* executor,
      CoordinatorMetrics* metrics, AllowedWorkerNames allowed = AllowedWorkerNames::Any(),
      SilentSessions* silent = nullptr);
  // A session refused before it starts.
  static grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Refuse(
      const grpc::Status& status);

  // SessionOutbox.
  bool Push(v1::CoordinatorMessage message) override;
  bool overflowed() const override;
  void Close() override;
  void CloseAfter(v1::CoordinatorMessage last) override;
  bool closed() const override;
  Delivery delivery() const override;

  // AwaitingHello.
  bool EndIfSilent(absl::Duration waited) override;

  // Reactions.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  SessionStream(grpc::CallbackServerContext* context, JobController* controller,
                SerialExecutor* executor, CoordinatorMetrics* metrics, AllowedWorkerNames allowed)
      : context_(context),
        controller_(controller),
        executor_(executor),
        metrics_(metrics),
        allowed_(std::move(allowed)) {}

  void OnHello(const v1::WorkerMessage& hello);
  // Posts `handle` to the executor and reads the next message once it has run.
  void HandleOnExecutor(const char* kind, absl::Time arrived,
                        std::function<void(const std::string& worker_id)> handle);
  void ReadNext();
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Observe(const char* kind, absl::Time arrived) const;

  grpc::CallbackServerContext* const context_;  // gRPC's, valid until OnDone
  JobController* const controller_;
  SerialExecutor* const executor_;
  CoordinatorMetrics* const metrics_;
  const AllowedWorkerNames allowed_;

  v1::WorkerMessage incoming_;  // written by gRPC between StartRead and OnReadDone
  std::string worker_id_;       // set by the hello, before any other message is read

  // mu_ also serialises the calls into gRPC (StartRead, StartWrite, Finish): none of them
  // runs a reaction inline except OnDone, which does not take it. TryCancel runs outside
  // it all the same: nothing in gRPC's API promises it runs no reaction inline.
  mutable absl::Mutex mu_;
  std::deque<v1::CoordinatorMessage> outgoing_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;  // writes the worker's side took
  // Close(), or the stream broke: finish once the write in flight is done or cancelled.
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called: no more reads or writes
  // CloseAfter(): finish once the queue is written.
  bool closing_after_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;     // closed for kMaxQueuedMessages
  bool hello_arrived_ ABSL_GUARDED_BY(mu_) = false;  // the first message was read
  // Close()'s TryCancel, which a Finish meanwhile waits for.
  CancelOutsideLock cancel_ ABSL_GUARDED_BY(mu_);
  // The hello was accepted and the controller's OpenSession posted: the messages read
  // after it are the session's, and its end is a CloseSession.
  std::atomic<bool> hello_accepted_{false};
  std::shared_ptr<SessionStream> self_;  // gRPC's reference, dropped in OnDone
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SESSION_STREAM_H_
