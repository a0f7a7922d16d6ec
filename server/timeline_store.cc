#include "server/timeline_store.h"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace shardwise {

void TimelineStore::ForgetLocked(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  for (const auto& [rank, ranked] : it->second.ranks) held_ -= ranked.spans.size();
  jobs_.erase(it);
  recency_.remove(job_id);
}

size_t TimelineStore::RankCapLocked(const JobSpans& job) const {
  const size_t job_cap = std::min(spans_per_job_, spans_total_ / std::max<size_t>(1, jobs_.size()));
  return std::max<size_t>(
      1, std::min(spans_per_rank_, job_cap / std::max<size_t>(1, job.ranks.size())));
}

void TimelineStore::Add(const std::string& job_id, int32_t attempt, int32_t rank,
                        const std::string& worker_id, const std::vector<v1::Span>& spans,
                        int64_t dropped) {
  absl::MutexLock lock(&mu_);
  if (auto held = jobs_.find(job_id); held != jobs_.end()) {
    if (attempt < held->second.attempt) return;
    if (attempt > held->second.attempt) ForgetLocked(job_id);
  }
  JobSpans& job = jobs_[job_id];
  job.attempt = attempt;
  recency_.remove(job_id);
  recency_.push_back(job_id);
  RankSpans& ranked = job.ranks[rank];
  ranked.worker_id = worker_id;
  // Each report's count is bounded (worker_number_bounds.h), their sum is not.
  ranked.dropped = dropped > std::numeric_limits<int64_t>::max() - ranked.dropped
                       ? std::numeric_limits<int64_t>::max()
                       : ranked.dropped + dropped;
  // Each rank's share (ranks hold more only until they next report).
  const size_t cap = RankCapLocked(job);
  for (const v1::Span& span : spans) ranked.spans.push_back(span);
  held_ += spans.size();
  while (ranked.spans.size() > cap) {
    ranked.spans.pop_front();
    ++ranked.dropped;
    --held_;
  }
  while (held_ > spans_total_ && recency_.front() != job_id) {
    const std::string oldest = recency_.front();
    ForgetLocked(oldest);
  }
}

v1::Timeline TimelineStore::Get(const std::string& job_id, size_t max_spans) const {
  absl::MutexLock lock(&mu_);
  v1::Timeline timeline;
  timeline.set_job_id(job_id);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return timeline;
  timeline.set_attempt(it->second.attempt);
  const size_t share =
      std::max<size_t>(1, max_spans / std::max<size_t>(1, it->second.ranks.size()));
  for (const auto& [rank, ranked] : it->second.ranks) {
    v1::RankTimeline* out = timeline.add_ranks();
    out->set_rank(rank);
    out->set_worker_id(ranked.worker_id);
    const size_t skipped = ranked.spans.size() - std::min(share, ranked.spans.size());
    out->set_dropped(ranked.dropped + static_cast<int64_t>(skipped));
    out->mutable_spans()->Reserve(static_cast<int>(ranked.spans.size() - skipped));
    for (auto span = ranked.spans.begin() + static_cast<std::ptrdiff_t>(skipped);
         span != ranked.spans.end(); ++span) {
      *out->add_spans() = *span;
    }
  }
  return timeline;
}

}  // namespace shardwise
