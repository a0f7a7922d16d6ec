#include "bench/gpu_busy/busy_trace.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace shardwise::gpu_busy {
namespace {

// The ends of the marker activities, in time order.
std::vector<int64_t> MarkerEnds(const std::vector<DeviceActivity>& activities,
                                std::string_view marker) {
  std::vector<int64_t> ends;
  for (const DeviceActivity& a : activities) {
    if (a.name.find(marker) != std::string::npos) ends.push_back(a.end_ns);
  }
  std::sort(ends.begin(), ends.end());
  return ends;
}

// The union of `sorted` (by start) intervals clipped to [begin, end).
int64_t UnionWithin(const std::vector<DeviceActivity>& sorted, int64_t begin, int64_t end) {
  int64_t busy = 0, covered_to = begin;
  for (const DeviceActivity& a : sorted) {
    if (a.start_ns >= end) break;
    const int64_t from = std::max(a.start_ns, covered_to), to = std::min(a.end_ns, end);
    if (to > from) {
      busy += to - from;
      covered_to = to;
    }
  }
  return busy;
}

}  // namespace

double StepBusy::fraction() const {
  const int64_t length = end_ns - begin_ns;
  return length > 0 ? static_cast<double>(busy_ns) / static_cast<double>(length) : 0.0;
}

std::vector<StepBusy> BusyPerStep(std::vector<DeviceActivity> activities,
                                  std::string_view step_marker, int markers_per_step) {
  // The last marker of each step's.
  const std::vector<int64_t> marker_ends = MarkerEnds(activities, step_marker);
  const auto per_step = static_cast<size_t>(std::max(markers_per_step, 1));
  std::vector<int64_t> ends;
  for (size_t k = per_step; k <= marker_ends.size(); k += per_step) {
    ends.push_back(marker_ends[k - 1]);
  }
  std::sort(
      activities.begin(), activities.end(),
      [](const DeviceActivity& a, const DeviceActivity& b) { return a.start_ns < b.start_ns; });
  std::vector<StepBusy> steps;
  for (size_t k = 1; k < ends.size(); ++k) {
    StepBusy step;
    step.begin_ns = ends[k - 1];
    step.end_ns = ends[k];
    step.busy_ns = UnionWithin(activities, step.begin_ns, step.end_ns);
    steps.push_back(step);
  }
  return steps;
}

absl::StatusOr<int> MarkersPerStep(const std::vector<DeviceActivity>& activities,
                                   std::string_view step_marker, int steps_run) {
  const size_t markers = MarkerEnds(activities, step_marker).size();
  if (steps_run <= 0 || markers == 0 || markers % static_cast<size_t>(steps_run) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the trace has ", markers, " activities named like '", std::string(step_marker),
        "', not a positive multiple of the ", steps_run, " steps run"));
  }
  return static_cast<int>(markers / static_cast<size_t>(steps_run));
}

std::string FormatActivity(const DeviceActivity& activity) {
  return absl::StrCat(activity.start_ns, "\t", activity.end_ns, "\t", activity.name);
}

absl::StatusOr<std::vector<DeviceActivity>> ParseTrace(std::istream& in) {
  std::vector<DeviceActivity> activities;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits('\t', 2));
    DeviceActivity a;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &a.start_ns) ||
        !absl::SimpleAtoi(fields[1], &a.end_ns) || a.end_ns < a.start_ns) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace line ", number, " is not START<TAB>END<TAB>NAME with START <= END: '",
                       line.substr(0, 120), "'"));
    }
    a.name = std::string(fields[2]);
    activities.push_back(std::move(a));
  }
  return activities;
}

absl::StatusOr<std::string> Summarize(const std::vector<StepBusy>& steps, int skip) {
  if (skip < 0 || static_cast<size_t>(skip) >= steps.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the trace has ", steps.size(), " steps; ", skip,
                     " are skipped as warm-up, so none is left to measure"));
  }
  std::vector<double> fractions;
  std::vector<int64_t> lengths;
  for (size_t k = static_cast<size_t>(skip); k < steps.size(); ++k) {
    fractions.push_back(steps[k].fraction());
    lengths.push_back(steps[k].end_ns - steps[k].begin_ns);
  }
  std::sort(fractions.begin(), fractions.end());
  std::sort(lengths.begin(), lengths.end());
  const size_t middle = fractions.size() / 2;
  return absl::StrFormat(
      "busy %.1f%% of a step (median of %d steps after %d skipped; least %.1f%%, most %.1f%%; "
      "step %.1f ms)",
      100 * fractions[middle], static_cast<int>(fractions.size()), skip, 100 * fractions.front(),
      100 * fractions.back(), static_cast<double>(lengths[middle]) / 1e6);
}

}  // namespace shardwise::gpu_busy
