#include "worker/daemon/report_outbox.h"

#include <algorithm>

namespace shardwise {

bool ReportOutbox::IsFinal(const v1::AttemptReport& report) {
  return report.phase() == v1::COMPLETED || report.phase() == v1::ABORTED;
}

void ReportOutbox::StartAttempt() {
  absl::MutexLock lock(&mu_);
  held_.clear();
  final_.reset();
  final_held_ = false;
}

void ReportOutbox::Sent(const v1::AttemptReport& report) {
  absl::MutexLock lock(&mu_);
  if (IsFinal(report)) final_ = report;
}

void ReportOutbox::Hold(const v1::AttemptReport& report) {
  absl::MutexLock lock(&mu_);
  if (IsFinal(report)) {
    final_ = report;
    final_held_ = true;
  }
  if (report.phase() == v1::PROGRESS) {
    // Only the newest progress matters; its spans are lost with the older ones.
    auto older = std::find_if(held_.begin(), held_.end(),
                              [](const v1::AttemptReport& r) { return r.phase() == v1::PROGRESS; });
    if (older != held_.end()) held_.erase(older);
  }
  if (held_.size() >= kMaxHeld) {
    // The oldest that is not final: a final report is never dropped.
    auto oldest = std::find_if(held_.begin(), held_.end(),
                               [](const v1::AttemptReport& r) { return !IsFinal(r); });
    if (oldest != held_.end()) held_.erase(oldest);
  }
  held_.push_back(report);
}

std::vector<v1::AttemptReport> ReportOutbox::Release(bool reattached) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::AttemptReport> out;
  if (reattached) {
    out.assign(held_.begin(), held_.end());
    if (final_.has_value() && !final_held_) out.push_back(*final_);
  }
  held_.clear();
  final_held_ = false;
  return out;
}

void ReportOutbox::Resend(bool reattached,
                          absl::FunctionRef<bool(const v1::AttemptReport&)> write) {
  const std::vector<v1::AttemptReport> reports = Release(reattached);
  for (size_t i = 0; i < reports.size(); ++i) {
    if (write(reports[i])) continue;
    for (size_t unsent = i; unsent < reports.size(); ++unsent) Hold(reports[unsent]);
    return;
  }
}

bool ReportOutbox::ended() const {
  absl::MutexLock lock(&mu_);
  return final_.has_value();
}

size_t ReportOutbox::held() const {
  absl::MutexLock lock(&mu_);
  return held_.size();
}

}  // namespace shardwise
