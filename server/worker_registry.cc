#include "server/worker_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardwise {

void WorkerRegistry::Unassign(Worker& worker) {
  worker.info.clear_job_id();
  worker.info.clear_attempt();
  worker.info.clear_rank();
  worker.owed_abort.reset();
}

WorkerRegistry::Worker* WorkerRegistry::Find(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

void WorkerRegistry::Touch(Worker& worker) const {
  worker.last_heartbeat = options_.clock->Now();
  worker.info.set_last_heartbeat_ms(absl::ToUnixMillis(worker.last_heartbeat));
}

// A session replaced or ended here is closed by the caller after the lock is released:
// closing a session stream talks to gRPC, which must never run under the registry's lock.
absl::StatusOr<WorkerRegistry::Registration> WorkerRegistry::Register(
    const v1::RegisterWorkerRequest& request) {
  std::shared_ptr<SessionOutbox> replaced;
  absl::StatusOr<Registration> registration = AddOrReplace(request, &replaced);
  if (replaced) replaced->Close();
  return registration;
}

absl::StatusOr<WorkerRegistry::Registration> WorkerRegistry::AddOrReplace(
    const v1::RegisterWorkerRequest& request, std::shared_ptr<SessionOutbox>* replaced) {
  absl::MutexLock lock(&mu_);
  Registration registration;
  registration.worker_id = request.name();
  if (workers_.size() >= options_.max_workers && Find(registration.worker_id) == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the coordinator holds ", workers_.size(),
                     " workers, its limit (--max_workers); "
                     "worker '",
                     registration.worker_id,
                     "' is not registered. Lost workers are forgotten "
                     "after --lost_worker_retention_ms; raise --max_workers for a larger cluster"));
  }
  Worker& worker = workers_[registration.worker_id];
  registration.previous = worker.info;
  worker.stopping = false;  // a daemon that registers is not stopping
  *replaced = std::move(worker.outbox);
  worker.outbox.reset();
  worker.info.set_id(registration.worker_id);
  worker.info.set_name(request.name());
  worker.info.set_device(request.device() == v1::DEVICE_KIND_UNSPECIFIED ? v1::CPU
                                                                         : request.device());
  if (auto awaited = awaited_quarantines_.find(registration.worker_id);
      awaited != awaited_quarantines_.end()) {
    if (awaited->second.first > options_.clock->Now()) {  // not ended while it was away
      worker.info.set_quarantined_until_ms(absl::ToUnixMillis(awaited->second.first));
      worker.info.set_quarantine_reason(awaited->second.second);
    }
    awaited_quarantines_.erase(awaited);
  }
  worker.info.set_cpu_threads(request.cpu_threads());
  worker.info.set_memory_bytes(request.memory_bytes());
  worker.info.set_data_probe_address(request.data_probe_address());
  *worker.info.mutable_features() = request.features();
  worker.info.set_data_plane_version(request.data_plane_version());
  if (request.has_folders()) {
    *worker.info.mutable_folders() = request.folders();
  } else {
    worker.info.clear_folders();
  }
  if (request.has_gpu()) {
    *worker.info.mutable_gpu() = request.gpu();
  } else {
    worker.info.clear_gpu();
  }
  // Not schedulable until its session is attached.
  worker.info.set_state(v1::LOST);
  worker.info.set_lost_reason("registered; no session yet");
  Unassign(worker);
  Touch(worker);
  worker.lost_since = worker.last_heartbeat;
  return registration;
}

absl::Status WorkerRegistry::AttachSession(const std::string& worker_id,
                                           const std::shared_ptr<SessionOutbox>& outbox) {
  std::shared_ptr<SessionOutbox> replaced;
  std::optional<v1::CoordinatorMessage> owed_abort;
  {
    absl::MutexLock lock(&mu_);
    Worker* worker = Find(worker_id);
    if (worker == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no registered worker '", worker_id, "'; call RegisterWorker first"));
    }
    replaced = std::move(worker->outbox);
    worker->outbox = outbox;
    worker->waiting_since.reset();
    // Counts start again with the session, on both sides.
    worker->counts_reads = false;
    worker->unread_messages = UnreadMessages();
    worker->info.clear_session_messages_sent();
    worker->info.clear_session_messages_read();
    owed_abort = std::exchange(worker->owed_abort, std::nullopt);
    if (worker->info.state() == v1::LOST) {
      Unassign(*worker);
      // Back while still running an ended attempt (DrainOnAttach): idle once it says so.
      worker->info.set_state(owed_abort.has_value() ? v1::DRAINING : v1::IDLE);
    }
    // With a session it is not lost, whatever it runs: a worker that re-attached its
    // attempt at registration (after a coordinator restart) is BUSY here already.
    worker->info.clear_lost_reason();
    Touch(*worker);
  }
  if (replaced) replaced->Close();
  if (owed_abort.has_value()) outbox->Push(std::move(*owed_abort));
  return absl::OkStatus();
}

bool WorkerRegistry::DetachSession(const std::string& worker_id,
                                   const std::shared_ptr<SessionOutbox>& outbox) {
  outbox->Close();
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker == nullptr || worker->outbox != outbox) return false;
  worker->outbox.reset();
  return true;
}

absl::StatusOr<WorkerRegistry::Assignment> WorkerRegistry::Heartbeat(
    const std::string& worker_id, std::optional<uint64_t> messages_read,
    const SessionOutbox* session, bool stopping) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker == nullptr) return absl::NotFoundError(absl::StrCat("no worker '", worker_id, "'"));
  Touch(*worker);
  // A heartbeat still in flight on a replaced stream counts that stream's messages.
  const bool current = session == nullptr || session == worker->outbox.get();
  if (messages_read.has_value() && current) {
    worker->counts_reads = true;
    worker->unread_messages.Read(*messages_read);
    worker->info.set_session_messages_read(static_cast<int64_t>(*messages_read));
  }
  if (stopping && current) MarkStoppingLocked(*worker);
  Assignment assignment;
  assignment.state = worker->info.state();
  assignment.job_id = worker->info.job_id();
  assignment.attempt = worker->info.attempt();
  assignment.rank = worker->info.rank();
  return assignment;
}

bool WorkerRegistry::Send(const std::string& worker_id, const v1::CoordinatorMessage& message) {
  std::shared_ptr<SessionOutbox> outbox;
  {
    absl::MutexLock lock(&mu_);
    Worker* worker = Find(worker_id);
    if (worker == nullptr || !worker->outbox) return false;
    outbox = worker->outbox;
  }
  // Outside the lock: a session stream starts its write here.
  return outbox->Push(message);
}

void WorkerRegistry::SetBusy(const std::string& worker_id, const std::string& job_id,
                             int32_t attempt, int32_t rank) {
  absl::MutexLock lock(&mu_);
  if (Worker* worker = Find(worker_id)) {
    worker->info.set_state(v1::BUSY);
    worker->info.set_job_id(job_id);
    worker->info.set_attempt(attempt);
    worker->info.set_rank(rank);
  }
}

bool WorkerRegistry::Runs(const std::string& worker_id, const std::string& job_id, int32_t attempt,
                          int32_t rank) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return false;
  const v1::WorkerInfo& info = it->second.info;
  return info.job_id() == job_id && info.attempt() == attempt && info.rank() == rank;
}

void WorkerRegistry::Drain(const std::string& worker_id, const v1::CoordinatorMessage& abort) {
  std::shared_ptr<SessionOutbox> outbox;
  {
    absl::MutexLock lock(&mu_);
    Worker* worker = Find(worker_id);
    if (worker == nullptr || worker->info.state() != v1::BUSY) return;
    // DRAINING first: an idle heartbeat answering the abort finds the state to leave.
    worker->info.set_state(v1::DRAINING);
    if (!worker->outbox) {
      worker->owed_abort = abort;
      return;
    }
    outbox = worker->outbox;
  }
  // A push refused by a closing session needs no keeping: its close makes the worker
  // LOST, and a worker that registers again naming the attempt is told to abort it then.
  outbox->Push(abort);
}

void WorkerRegistry::DrainOnAttach(const std::string& worker_id,
                                   const v1::CoordinatorMessage& abort) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker != nullptr && worker->info.state() == v1::LOST && !worker->outbox) {
    worker->owed_abort = abort;
  }
}

void WorkerRegistry::SetIdle(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker != nullptr && worker->info.state() != v1::LOST) {
    worker->info.set_state(worker->stopping ? v1::DRAINING : v1::IDLE);
    Unassign(*worker);
  }
}

void WorkerRegistry::MarkStopping(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker != nullptr) MarkStoppingLocked(*worker);
}

void WorkerRegistry::MarkStoppingLocked(Worker& worker) {
  worker.stopping = true;
  if (worker.info.state() == v1::IDLE) worker.info.set_state(v1::DRAINING);
}

bool WorkerRegistry::IsStopping(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  const Worker* worker = Find(worker_id);
  return worker != nullptr && worker->stopping;
}

void WorkerRegistry::AwaitIdle(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker != nullptr && worker->info.state() == v1::BUSY) worker->info.set_state(v1::DRAINING);
}

void WorkerRegistry::Quarantine(const std::string& worker_id, const std::string& reason,
                                absl::Time until) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker == nullptr) {
    awaited_quarantines_[worker_id] = {until, reason};
    return;
  }
  worker->info.set_quarantined_until_ms(absl::ToUnixMillis(until));
  worker->info.set_quarantine_reason(reason);
}

absl::StatusOr<v1::WorkerInfo> WorkerRegistry::MarkLost(const std::string& worker_id,
                                                        const std::string& reason) {
  std::shared_ptr<SessionOutbox> outbox;
  v1::WorkerInfo before;
  {
    absl::MutexLock lock(&mu_);
    Worker* worker = Find(worker_id);
    if (worker == nullptr) return absl::NotFoundError(absl::StrCat("no worker '", worker_id, "'"));
    before = worker->info;
    outbox = std::move(worker->outbox);
    worker->outbox.reset();
    worker->info.set_state(v1::LOST);
    worker->info.set_lost_reason(reason);
    worker->lost_since = options_.clock->Now();
    Unassign(*worker);
  }
  if (outbox) outbox->Close();
  return before;
}

std::vector<std::string> WorkerRegistry::Silent(absl::Duration timeout) const {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  std::vector<std::string> silent;
  for (const auto& [id, worker] : workers_) {
    if (worker.info.state() != v1::LOST && now - worker.last_heartbeat > timeout) {
      silent.push_back(id);
    }
  }
  return silent;
}

std::vector<std::string> WorkerRegistry::Unread(absl::Duration timeout) {
  std::vector<std::pair<std::string, std::shared_ptr<SessionOutbox>>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, worker] : workers_) {
      if (worker.info.state() != v1::LOST && worker.outbox)
        sessions.emplace_back(id, worker.outbox);
    }
  }
  std::vector<SessionOutbox::Delivery> deliveries;  // asked outside the lock: see Register
  deliveries.reserve(sessions.size());
  for (const auto& session : sessions) deliveries.push_back(session.second->delivery());
  const absl::Time now = options_.clock->Now();
  std::vector<std::string> unread;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < sessions.size(); ++i) {
    Worker* worker = Find(sessions[i].first);
    if (worker == nullptr || worker->outbox != sessions[i].second) continue;  // replaced since
    if (LeavesUnread(*worker, deliveries[i], now, timeout)) unread.push_back(sessions[i].first);
  }
  return unread;
}

bool WorkerRegistry::LeavesUnread(Worker& worker, const SessionOutbox::Delivery& delivery,
                                  absl::Time now, absl::Duration timeout) {
  worker.info.set_session_messages_sent(static_cast<int64_t>(delivery.taken));
  bool stalled_write = false;
  if (!delivery.waiting) {
    worker.waiting_since.reset();
  } else if (!worker.waiting_since.has_value() || delivery.taken != worker.taken_seen) {
    worker.waiting_since = now;  // a wait begins, or the worker read on
    worker.taken_seen = delivery.taken;
  } else {
    stalled_write = now - *worker.waiting_since > timeout;
  }
  if (!worker.counts_reads) return stalled_write;
  worker.unread_messages.Written(delivery.taken, now);
  const std::optional<absl::Time> oldest = worker.unread_messages.OldestUnreadSince();
  return stalled_write || (oldest.has_value() && now - *oldest > timeout);
}

std::vector<std::string> WorkerRegistry::RemoveLongLost() {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  std::vector<std::string> removed;
  for (auto it = workers_.begin(); it != workers_.end();) {
    const Worker& worker = it->second;
    if (worker.info.state() == v1::LOST && !worker.outbox &&
        now - worker.lost_since > options_.lost_retention) {
      // A quarantine still in force outlives the entry: the worker registering again
      // would otherwise be given the job it was kept from.
      const absl::Time until = absl::FromUnixMillis(worker.info.quarantined_until_ms());
      if (until > now) awaited_quarantines_[it->first] = {until, worker.info.quarantine_reason()};
      removed.push_back(it->first);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  // Bounded: those that ended while their workers stayed away go.
  absl::erase_if(awaited_quarantines_,
                 [now](const auto& awaited) { return awaited.second.first <= now; });
  return removed;
}

std::vector<v1::WorkerInfo> WorkerRegistry::Idle(v1::DeviceKind device) const {
  const int64_t now_ms = absl::ToUnixMillis(options_.clock->Now());
  absl::MutexLock lock(&mu_);
  std::vector<v1::WorkerInfo> idle;
  for (const auto& [id, worker] : workers_) {
    if (worker.info.state() == v1::IDLE && worker.info.device() == device && worker.outbox &&
        worker.info.quarantined_until_ms() <= now_ms) {
      idle.push_back(worker.info);
    }
  }
  return idle;
}

std::vector<IdleWorker> WorkerRegistry::Offers(v1::DeviceKind device) const {
  absl::MutexLock lock(&mu_);
  std::vector<IdleWorker> offers;
  for (const auto& [id, worker] : workers_) {
    if (worker.info.state() != v1::LOST && worker.info.device() == device) {
      offers.push_back(WorkerOffer(worker.info));
    }
  }
  return offers;
}

std::vector<v1::WorkerInfo> WorkerRegistry::List(
    const std::string& after_id, size_t limit, absl::FunctionRef<bool(const v1::WorkerInfo&)> keep,
    bool* more) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::WorkerInfo> page;
  *more = false;
  for (auto it = workers_.upper_bound(after_id); it != workers_.end(); ++it) {
    if (!keep(it->second.info)) continue;
    if (page.size() == limit) {
      *more = true;
      break;
    }
    page.push_back(it->second.info);
  }
  return page;
}

std::vector<v1::WorkerInfo> WorkerRegistry::List() const {
  bool more = false;
  return List(
      "", size(), [](const v1::WorkerInfo&) { return true; }, &more);
}

absl::StatusOr<v1::WorkerInfo> WorkerRegistry::Get(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return absl::NotFoundError(absl::StrCat("no worker '", worker_id, "'"));
  return it->second.info;
}

std::map<std::pair<v1::WorkerState, v1::DeviceKind>, int64_t>
WorkerRegistry::CountByStateAndDevice() const {
  absl::MutexLock lock(&mu_);
  std::map<std::pair<v1::WorkerState, v1::DeviceKind>, int64_t> counts;
  for (v1::WorkerState state : {v1::IDLE, v1::BUSY, v1::DRAINING, v1::LOST}) {
    for (v1::DeviceKind device : {v1::CPU, v1::CUDA}) counts[{state, device}] = 0;
  }
  for (const auto& [id, worker] : workers_) {
    ++counts[{worker.info.state(), worker.info.device()}];
  }
  return counts;
}

absl::Duration WorkerRegistry::OldestHeartbeatAge() const {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  absl::Duration oldest = absl::ZeroDuration();
  for (const auto& [id, worker] : workers_) {
    if (worker.info.state() != v1::LOST) oldest = std::max(oldest, now - worker.last_heartbeat);
  }
  return oldest;
}

size_t WorkerRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return workers_.size();
}

void WorkerRegistry::CloseAllSessions(const std::optional<v1::CoordinatorMessage>& last) {
  std::vector<std::shared_ptr<SessionOutbox>> outboxes;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, worker] : workers_) {
      if (worker.outbox) outboxes.push_back(worker.outbox);
    }
  }
  for (const auto& outbox : outboxes) {
    if (last.has_value()) {
      outbox->CloseAfter(*last);
    } else {
      outbox->Close();
    }
  }
}

}  // namespace shardwise
