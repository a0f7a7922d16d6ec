#ifndef SHARDWISE_COMMON_METRICS_H_
#define SHARDWISE_COMMON_METRICS_H_

// Metrics in Prometheus' data model, written out in its text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/): counters, gauges and
// histograms, each a family with a HELP and TYPE line and a fixed set of label names.
//
// Label values come from small closed sets the code names (a job state, a message
// kind, a collective), never from user input such as job ids or names, so a family's
// series are bounded. Gauges that describe state elsewhere (jobs by state, heartbeat
// ages) are filled at scrape time by collectors, so nothing has to keep them current.
//
// Recording is lock-free (atomics) and may happen on any thread, on hot paths; a scrape
// (Exposition) takes the registry's lock and runs the collectors.
//
// Thread-safety: every method may be called from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardwise {

// A double that many threads add to without a lock.
class AtomicDouble {
 public:
  void Add(double delta) {
    uint64_t seen = bits_.load(std::memory_order_relaxed);
    while (!bits_.compare_exchange_weak(seen, ToBits(FromBits(seen) + delta),
                                        std::memory_order_relaxed)) {
    }
  }
  void Set(double value) { bits_.store(ToBits(value), std::memory_order_relaxed); }
  double Get() const { return FromBits(bits_.load(std::memory_order_relaxed)); }

 private:
  static uint64_t ToBits(double value);
  static double FromBits(uint64_t bits);
  std::atomic<uint64_t> bits_{0};
};

class Counter {
 public:
  void Increment(double by = 1) { value_.Add(by); }
  double value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Gauge {
 public:
  void Set(double value) { value_.Set(value); }
  void Add(double by) { value_.Add(by); }
  double value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Histogram {
 public:
  // `bounds`: the upper bounds of the buckets, ascending (+Inf is implied).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  void ObserveDuration(absl::Duration duration) { Observe(absl::ToDoubleSeconds(duration)); }

  const std::vector<double>& bounds() const { return bounds_; }
  // Observations at or below bounds()[i] (cumulative), and in all.
  uint64_t CumulativeCount(size_t bucket) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.Get(); }
  // The q-quantile (0 < q <= 1), interpolated linearly within its bucket as Prometheus'
  // histogram_quantile does; the largest finite bound if it falls in +Inf; 0 if empty.
  double Quantile(double q) const;

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // not cumulative; one per bound
  std::atomic<uint64_t> count_{0};
  AtomicDouble sum_;
};

// Exponential bucket bounds: `count` of them from `start`, each `factor` times the last.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// Bounds for latencies in seconds: 50 us to about 44 s, 4 per doubling.
std::vector<double> LatencyBuckets();

// A family of one metric type: one series per combination of label values.
template <typename Metric>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::function<std::unique_ptr<Metric>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // The series with these label values (as many as the family has names), made on first
  // use and kept for the process's life.
  Metric& With(const std::vector<std::string>& label_values) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Metric>& metric = series_[label_values];
    if (metric == nullptr) metric = make_();
    return *metric;
  }
  // Drops every series: for a family a collector refills at each scrape (per running job,
  // say), so series of what is gone do not linger.
  void Clear() {
    absl::MutexLock lock(&mu_);
    series_.clear();
  }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Calls `visit` for every series, ordered by label values.
  void ForEach(
      const std::function<void(const std::vector<std::string>&, const Metric&)>& visit) const {
    absl::MutexLock lock(&mu_);
    for (const auto& [labels, metric] : series_) visit(labels, *metric);
  }

 private:
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<Metric>()> make_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  // Families live as long as the registry; names follow Prometheus' conventions
  // (shardwise_<component>_<what>_<unit>, counters ending in _total).
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  const std::vector<double>& bounds,
                                  std::vector<std::string> label_names = {});
  // Runs before every scrape, to set gauges from state kept elsewhere.
  void AddCollector(std::function<void()> collect);

  // Every family in the text exposition format (version 0.0.4).
  // Scrapes are served one at a time: a collector clears and fills its series, which a
  // scrape beside it would find empty.
  std::string Exposition() const;

 private:
  struct Entry {
    std::string name;
    std::string help;
    std::string type;  // "counter", "gauge", "histogram"
    std::unique_ptr<Family<Counter>> counters;
    std::unique_ptr<Family<Gauge>> gauges;
    std::unique_ptr<Family<Histogram>> histograms;
  };
  Entry& Add(const std::string& name, const std::string& help, const std::string& type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex scrape_mu_;  // taken before mu_ and before the collectors' locks
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(mu_);
};

// The samples of a text exposition, as "name{labels}" -> value (comments skipped): for
// tests and the load generator, which read what a scrape returns.
std::map<std::string, double> ParseExposition(const std::string& text);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_METRICS_H_
