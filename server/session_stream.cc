#include "server/session_stream.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/printable_text.h"
#include "server/worker_number_bounds.h"
#include "server/worker_text_bounds.h"

namespace shardwise {

namespace {

class RefusedSession final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  explicit RefusedSession(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// What a session's first message was, for the refusal of one that is not a usable hello.
std::string FirstMessageKind(const v1::WorkerMessage& message) {
  if (message.has_hello()) return "a hello with an empty worker_id";
  const google::protobuf::FieldDescriptor* field =
      v1::WorkerMessage::descriptor()->FindFieldByNumber(message.kind_case());
  if (field == nullptr) return "a message of a kind this coordinator does not know";
  return absl::StrCat("a ", field->name());
}

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* SessionStream::Refuse(
    const grpc::Status& status) {
  return new RefusedSession(status);
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* SessionStream::Start(
    grpc::CallbackServerContext* context, JobController* controller, SerialExecutor* executor,
    CoordinatorMetrics* metrics, AllowedWorkerNames allowed, SilentSessions* silent) {
  std::shared_ptr<SessionStream> stream(
      new SessionStream(context, controller, executor, metrics, std::move(allowed)));
  stream->self_ = stream;
  if (silent != nullptr) silent->Add(stream);
  absl::MutexLock lock(&stream->mu_);
  stream->StartRead(&stream->incoming_);
  return stream.get();
}

void SessionStream::Observe(const char* kind, absl::Time arrived) const {
  if (metrics_ == nullptr) return;
  metrics_->worker_message_seconds.With({kind}).ObserveDuration(Clock::Real().Now() - arrived);
}

bool SessionStream::Push(v1::CoordinatorMessage message) {
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_ || closing_after_sent_) return false;
    if (outgoing_.size() < kMaxQueuedMessages) {
      outgoing_.push_back(std::move(message));
      if (!writing_) {
        writing_ = true;
        // A deque keeps references to its elements as others are added behind them.
        StartWrite(&outgoing_.front());
      }
      return true;
    }
    overflowed_ = true;
  }
  Close();  // the controller loses the worker when the session ends (CloseSession)
  return false;
}

bool SessionStream::overflowed() const {
  absl::MutexLock lock(&mu_);
  return overflowed_;
}

void SessionStream::Close() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!writing_) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    // The write's OnWriteDone finishes the call; if the worker reads nothing, it never
    // comes without the cancel.
    if (finished_ || !cancel_.Begin()) return;
  }
  context_->TryCancel();
  absl::MutexLock lock(&mu_);
  if (cancel_.End()) {
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the coordinator closed the session"));
  }
}

void SessionStream::CloseAfter(v1::CoordinatorMessage last) {
  absl::MutexLock lock(&mu_);
  if (closing_ || finished_ || closing_after_sent_) return;
  outgoing_.push_back(std::move(last));
  closing_after_sent_ = true;
  if (!writing_) {
    writing_ = true;
    StartWrite(&outgoing_.front());
  }
}

bool SessionStream::closed() const {
  absl::MutexLock lock(&mu_);
  return closing_ || finished_ || closing_after_sent_;
}

SessionOutbox::Delivery SessionStream::delivery() const {
  absl::MutexLock lock(&mu_);
  return {taken_, writing_};
}

void SessionStream::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  if (cancel_.HoldsFinish()) return;  // Close() finishes once TryCancel has returned
  finished_ = true;
  outgoing_.clear();
  // Finish may run OnDone inline, which drops gRPC's reference: keep one until we return.
  std::shared_ptr<SessionStream> keep = self_;
  Finish(status);
}

void SessionStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  if (!outgoing_.empty()) outgoing_.pop_front();
  if (ok) ++taken_;
  if (!ok) closing_ = true;  // the stream broke: the read side sees it too
  if (closing_ || outgoing_.empty()) {
    writing_ = false;
    if (closing_ || closing_after_sent_) FinishLocked(grpc::Status::OK);
    return;
  }
  StartWrite(&outgoing_.front());
}

void SessionStream::ReadNext() {
  absl::MutexLock lock(&mu_);
  if (!finished_) StartRead(&incoming_);
}

void SessionStream::OnReadDone(bool ok) {
  const absl::Time arrived = Clock::Real().Now();
  if (!ok) {
    // The worker went away, or the stream broke: finish; OnDone closes the session.
    Close();
    return;
  }
  // Fields this release does not read (a newer worker's, or padding) would be kept with
  // what they arrived in (a report's progress and spans, kept for the job): dropped here.
  incoming_.DiscardUnknownFields();
  if (!hello_accepted_.load()) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;  // ended for its silence as the hello came: OnDone follows
      hello_arrived_ = true;
    }
    OnHello(incoming_);
    return;
  }
  BoundWorkerText(&incoming_);  // before any of it is kept or shown
  BoundWorkerNumbers(&incoming_);
  switch (incoming_.kind_case()) {
    case v1::WorkerMessage::kHeartbeat:
      controller_->OnHeartbeat(worker_id_, incoming_.heartbeat(), this);
      Observe("heartbeat", arrived);
      ReadNext();
      return;
    case v1::WorkerMessage::kReport:
      HandleOnExecutor("report", arrived,
                       [this, report = incoming_.report()](const std::string& worker_id) {
                         controller_->OnReport(worker_id, report);
                       });
      return;
    case v1::WorkerMessage::kHookAck:
      HandleOnExecutor("hook_ack", arrived,
                       [this, ack = incoming_.hook_ack()](const std::string& worker_id) {
                         controller_->OnHookAck(worker_id, ack);
                       });
      return;
    case v1::WorkerMessage::kProbeResult:
      HandleOnExecutor("probe_result", arrived,
                       [this, result = incoming_.probe_result()](const std::string& worker_id) {
                         controller_->OnProbeResult(worker_id, result);
                       });
      return;
    default:  // a second hello, or a kind this coordinator does not know: ignored
      ReadNext();
      return;
  }
}

void SessionStream::HandleOnExecutor(const char* kind, absl::Time arrived,
                                     std::function<void(const std::string&)> handle) {
  executor_->Post([self = shared_from_this(), kind, arrived, handle = std::move(handle)] {
    handle(self->worker_id_);
    self->Observe(kind, arrived);
    self->ReadNext();
  });
}

void SessionStream::OnHello(const v1::WorkerMessage& hello) {
  const absl::Time arrived = Clock::Real().Now();
  if (!hello.has_hello() || hello.hello().worker_id().empty()) {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("the first session message must be a hello with a "
                                           "worker_id; got ",
                                           FirstMessageKind(hello))));
    return;
  }
  if (const absl::Status allowed =
          allowed_.Check(AllowedWorkerNames::Call::kSession, hello.hello().worker_id());
      !allowed.ok()) {
    absl::MutexLock lock(&mu_);
    FinishLocked(ToGrpcStatus(allowed));
    return;
  }
  worker_id_ = hello.hello().worker_id();
  // Before the OpenSession is posted: a stream that ends from here on, even before that
  // runs or while it writes the worker's first messages, posts its CloseSession after it
  // (OnDone), so that the registry never keeps a session that has ended.
  hello_accepted_.store(true);
  executor_->Post([self = shared_from_this(), arrived] {
    const absl::Status opened = self->controller_->OpenSession(self->worker_id_, self);
    if (self->metrics_ != nullptr) {
      self->metrics_->worker_sessions_total.With({opened.ok() ? "opened" : "refused"}).Increment();
    }
    self->Observe("session_open", arrived);
    absl::MutexLock lock(&self->mu_);
    if (!opened.ok()) {
      self->FinishLocked(ToGrpcStatus(opened));
      return;
    }
    if (!self->finished_) self->StartRead(&self->incoming_);
  });
}

bool SessionStream::EndIfSilent(absl::Duration waited) {
  absl::MutexLock lock(&mu_);
  if (hello_arrived_ || finished_) return false;
  if (metrics_ != nullptr) metrics_->worker_sessions_total.With({"silent"}).Increment();
  FinishLocked(ToGrpcStatus(absl::DeadlineExceededError(
      absl::StrCat("no hello within ", absl::FormatDuration(waited),
                   " of the session's start: a worker's first session message is its hello"))));
  return true;
}

// May run inline in Finish(), under mu_: takes no lock of its own.
void SessionStream::OnDone() {
  std::shared_ptr<SessionStream> self = std::move(self_);
  if (!hello_accepted_.load()) return;
  // The controller decides what a closed session means (a lost worker, or nothing if a
  // newer session replaced it, or the controller refused it); `self` keeps the outbox
  // alive until then.
  executor_->Post([self] { self->controller_->CloseSession(self->worker_id_, self); });
}

}  // namespace shardwise
