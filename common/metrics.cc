#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardwise {
namespace {

std::string EscapeHelp(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeLabelValue(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  return absl::StrFormat("%.9g", value);
}

// {a="x",b="y"} with an extra label at the end, or "" without any.
std::string Labels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                   const std::string& extra_name = "", const std::string& extra_value = "") {
  std::vector<std::string> pairs;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    pairs.push_back(absl::StrCat(names[i], "=\"", EscapeLabelValue(values[i]), "\""));
  }
  if (!extra_name.empty()) pairs.push_back(absl::StrCat(extra_name, "=\"", extra_value, "\""));
  if (pairs.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < pairs.size(); ++i) absl::StrAppend(&out, i ? "," : "", pairs[i]);
  return out + "}";
}

}  // namespace

uint64_t AtomicDouble::ToBits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

double AtomicDouble::FromBits(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.Add(value);
}

uint64_t Histogram::CumulativeCount(size_t bucket) const {
  uint64_t total = 0;
  for (size_t i = 0; i <= bucket && i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
  }
  return total;
}

double Histogram::Quantile(double q) const {
  const uint64_t total = CumulativeCount(bounds_.size());
  if (total == 0 || bounds_.empty()) return 0;
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    const uint64_t in_bucket = buckets_[i].load(std::memory_order_relaxed);
    if (static_cast<double>(below + in_bucket) >= rank && in_bucket > 0) {
      const double lower = i == 0 ? 0 : bounds_[i - 1];
      return lower + (bounds_[i] - lower) * (rank - static_cast<double>(below)) /
                         static_cast<double>(in_bucket);
    }
    below += in_bucket;
  }
  return bounds_.back();
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

std::vector<double> LatencyBuckets() { return ExponentialBuckets(50e-6, std::pow(2.0, 0.25), 80); }

MetricsRegistry::Entry& MetricsRegistry::Add(const std::string& name, const std::string& help,
                                             const std::string& type) {
  entries_.push_back(std::make_unique<Entry>());
  Entry& entry = *entries_.back();
  entry.name = name;
  entry.help = help;
  entry.type = type;
  return entry;
}

Family<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  Entry& entry = Add(name, help, "counter");
  entry.counters = std::make_unique<Family<Counter>>(std::move(label_names),
                                                     [] { return std::make_unique<Counter>(); });
  return *entry.counters;
}

Family<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  Entry& entry = Add(name, help, "gauge");
  entry.gauges = std::make_unique<Family<Gauge>>(std::move(label_names),
                                                 [] { return std::make_unique<Gauge>(); });
  return *entry.gauges;
}

Family<Histogram>& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                                 const std::vector<double>& bounds,
                                                 std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  Entry& entry = Add(name, help, "histogram");
  entry.histograms = std::make_unique<Family<Histogram>>(
      std::move(label_names), [bounds] { return std::make_unique<Histogram>(bounds); });
  return *entry.histograms;
}

void MetricsRegistry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::string MetricsRegistry::Exposition() const {
  absl::MutexLock scrape(&scrape_mu_);
  std::vector<std::function<void()>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  // Outside the lock: a collector reads other components, which take their own locks.
  for (const auto& collect : collectors) collect();
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& entry : entries_) {
    absl::StrAppend(&out, "# HELP ", entry->name, " ", EscapeHelp(entry->help), "\n# TYPE ",
                    entry->name, " ", entry->type, "\n");
    if (entry->counters) {
      entry->counters->ForEach([&](const std::vector<std::string>& labels, const Counter& c) {
        absl::StrAppend(&out, entry->name, Labels(entry->counters->label_names(), labels), " ",
                        Number(c.value()), "\n");
      });
    }
    if (entry->gauges) {
      entry->gauges->ForEach([&](const std::vector<std::string>& labels, const Gauge& g) {
        absl::StrAppend(&out, entry->name, Labels(entry->gauges->label_names(), labels), " ",
                        Number(g.value()), "\n");
      });
    }
    if (entry->histograms) {
      const auto& names = entry->histograms->label_names();
      entry->histograms->ForEach([&](const std::vector<std::string>& labels, const Histogram& h) {
        for (size_t i = 0; i < h.bounds().size(); ++i) {
          absl::StrAppend(&out, entry->name, "_bucket",
                          Labels(names, labels, "le", Number(h.bounds()[i])), " ",
                          h.CumulativeCount(i), "\n");
        }
        absl::StrAppend(&out, entry->name, "_bucket", Labels(names, labels, "le", "+Inf"), " ",
                        h.CumulativeCount(h.bounds().size()), "\n");
        absl::StrAppend(&out, entry->name, "_sum", Labels(names, labels), " ", Number(h.sum()),
                        "\n");
        absl::StrAppend(&out, entry->name, "_count", Labels(names, labels), " ",
                        h.CumulativeCount(h.bounds().size()), "\n");
      });
    }
  }
  return out;
}

std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> samples;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == std::string::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) continue;
    samples[line.substr(0, space)] = value;
  }
  return samples;
}

}  // namespace shardwise
