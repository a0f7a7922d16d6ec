#include "server/worker_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardwise {
namespace {

void ClearAssignment(v1::WorkerInfo* info) {
  info->clear_job_id();
  info->clear_attempt();
  info->clear_rank();
}

std::vector<v1::WorkerInfo> SortedById(std::vector<v1::WorkerInfo> workers) {
  std::sort(workers.begin(), workers.end(),
            [](const v1::WorkerInfo& a, const v1::WorkerInfo& b) { return a.id() < b.id(); });
  return workers;
}

}  // namespace

WorkerRegistry::Worker* WorkerRegistry::Find(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerRegistry::Registration WorkerRegistry::Register(const v1::RegisterWorkerRequest& request) {
  absl::MutexLock lock(&mu_);
  Registration registration;
  registration.worker_id = request.name();
  Worker& worker = workers_[registration.worker_id];
  registration.previous = worker.info;
  if (worker.outbox) worker.outbox->Close();
  worker.outbox.reset();
  worker.info.set_id(registration.worker_id);
  worker.info.set_name(request.name());
  worker.info.set_device(request.device() == v1::DEVICE_KIND_UNSPECIFIED ? v1::CPU
                                                                         : request.device());
  worker.info.set_cpu_threads(request.cpu_threads());
  worker.info.set_memory_bytes(request.memory_bytes());
  if (request.has_gpu()) {
    *worker.info.mutable_gpu() = request.gpu();
  } else {
    worker.info.clear_gpu();
  }
  // Not schedulable until its session is attached.
  worker.info.set_state(v1::LOST);
  worker.info.set_lost_reason("registered; no session yet");
  ClearAssignment(&worker.info);
  worker.last_heartbeat = absl::Now();
  worker.info.set_last_heartbeat_ms(absl::ToUnixMillis(worker.last_heartbeat));
  return registration;
}

absl::StatusOr<std::shared_ptr<SessionOutbox>> WorkerRegistry::AttachSession(
    const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker == nullptr) {
    return absl::NotFoundError(absl::StrCat("no registered worker '", worker_id,
                                            "'; call RegisterWorker first"));
  }
  if (worker->outbox) worker->outbox->Close();
  worker->outbox = std::make_shared<SessionOutbox>();
  if (worker->info.state() == v1::LOST) {
    worker->info.set_state(v1::IDLE);
    worker->info.clear_lost_reason();
    ClearAssignment(&worker->info);
  }
  worker->last_heartbeat = absl::Now();
  worker->info.set_last_heartbeat_ms(absl::ToUnixMillis(worker->last_heartbeat));
  return worker->outbox;
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

absl::StatusOr<v1::WorkerInfo> WorkerRegistry::Heartbeat(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker == nullptr) return absl::NotFoundError(absl::StrCat("no worker '", worker_id, "'"));
  worker->last_heartbeat = absl::Now();
  worker->info.set_last_heartbeat_ms(absl::ToUnixMillis(worker->last_heartbeat));
  return worker->info;
}

bool WorkerRegistry::Send(const std::string& worker_id, const v1::CoordinatorMessage& message) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  return worker != nullptr && worker->outbox && worker->outbox->Push(message);
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

void WorkerRegistry::SetDraining(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker != nullptr && worker->info.state() == v1::BUSY) worker->info.set_state(v1::DRAINING);
}

void WorkerRegistry::SetIdle(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker != nullptr && worker->info.state() != v1::LOST) {
    worker->info.set_state(v1::IDLE);
    ClearAssignment(&worker->info);
  }
}

absl::StatusOr<v1::WorkerInfo> WorkerRegistry::MarkLost(const std::string& worker_id,
                                                        const std::string& reason) {
  absl::MutexLock lock(&mu_);
  Worker* worker = Find(worker_id);
  if (worker == nullptr) return absl::NotFoundError(absl::StrCat("no worker '", worker_id, "'"));
  v1::WorkerInfo before = worker->info;
  if (worker->outbox) worker->outbox->Close();
  worker->outbox.reset();
  worker->info.set_state(v1::LOST);
  worker->info.set_lost_reason(reason);
  ClearAssignment(&worker->info);
  return before;
}

std::vector<std::string> WorkerRegistry::Silent(absl::Time now, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> silent;
  for (const auto& [id, worker] : workers_) {
    if (worker.info.state() != v1::LOST && now - worker.last_heartbeat > timeout) {
      silent.push_back(id);
    }
  }
  std::sort(silent.begin(), silent.end());
  return silent;
}

std::vector<v1::WorkerInfo> WorkerRegistry::Idle(v1::DeviceKind device) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::WorkerInfo> idle;
  for (const auto& [id, worker] : workers_) {
    if (worker.info.state() == v1::IDLE && worker.info.device() == device && worker.outbox) {
      idle.push_back(worker.info);
    }
  }
  return SortedById(std::move(idle));
}

std::vector<v1::WorkerInfo> WorkerRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::WorkerInfo> all;
  for (const auto& [id, worker] : workers_) all.push_back(worker.info);
  return SortedById(std::move(all));
}

absl::StatusOr<v1::WorkerInfo> WorkerRegistry::Get(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return absl::NotFoundError(absl::StrCat("no worker '", worker_id, "'"));
  return it->second.info;
}

void WorkerRegistry::CloseAllSessions() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, worker] : workers_) {
    if (worker.outbox) worker.outbox->Close();
  }
}

}  // namespace shardwise
