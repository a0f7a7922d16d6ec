#include "worker/fsdp/full_model_stream.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardwise::fsdp {

absl::StatusOr<FullModelReadPlan> PlanFullModelRead(const FlatLayout& layout,
                                                    const std::vector<std::string>& names) {
  std::map<std::string, int> index;
  for (size_t p = 0; p < layout.model.params.size(); ++p) {
    index[layout.model.params[p].name] = static_cast<int>(p);
  }
  FullModelReadPlan plan;
  std::set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto found = index.find(names[i]);
    if (found == index.end() || !seen.insert(names[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("reading the full model: '", names[i], "' is ",
                       found == index.end() ? "not a parameter of the model" : "named twice"));
    }
    plan.params.push_back(found->second);
    const int unit = layout.slots[found->second].unit;
    if (plan.last_read.count(unit) == 0) plan.unit_order.push_back(unit);
    plan.last_read[unit] = i;
  }
  return plan;
}

absl::StatusOr<FullModelStream> FullModelStream::Make(FsdpModel* model,
                                                      const std::vector<std::string>& names,
                                                      bool to_host) {
  ASSIGN_OR_RETURN(FullModelReadPlan plan, PlanFullModelRead(model->layout(), names));
  return FullModelStream(model, std::move(plan), to_host);
}

absl::Status FullModelStream::GatherNextUnit(bool to_host) {
  RETURN_IF_ERROR(broken_);
  const int unit = plan_.unit_order[next_gather_];
  absl::StatusOr<std::vector<float>> full = model_->GatherUnit(unit, to_host);
  if (!full.ok()) {
    broken_ = full.status();
    return broken_;
  }
  ++next_gather_;
  held_floats_ += static_cast<int64_t>(full->size());
  peak_held_floats_ = std::max(peak_held_floats_, held_floats_);
  held_[unit] = *std::move(full);
  return absl::OkStatus();
}

absl::StatusOr<HostTensor> FullModelStream::Next(const std::string& name) {
  RETURN_IF_ERROR(broken_);
  const FlatLayout& layout = model_->layout();
  if (next_read_ >= plan_.params.size() ||
      layout.model.params[plan_.params[next_read_]].name != name) {
    return absl::InternalError(absl::StrCat(
        "reading the full model: '", name, "' asked for where the plan reads ",
        next_read_ < plan_.params.size()
            ? absl::StrCat("'", layout.model.params[plan_.params[next_read_]].name, "'")
            : "nothing more"));
  }
  const int param = plan_.params[next_read_];
  const ParameterSlot& slot = layout.slots[param];
  // Units are gathered in the order their first parameter is read: this one is the next.
  if (held_.count(slot.unit) == 0) RETURN_IF_ERROR(GatherNextUnit(to_host_));
  const std::vector<float>& full = held_.at(slot.unit);
  HostTensor tensor;
  if (to_host_) tensor = F32Tensor(layout.model.params[param].shape, full.data() + slot.offset);
  if (plan_.last_read.at(slot.unit) == next_read_) {
    held_floats_ -= static_cast<int64_t>(full.size());
    held_.erase(slot.unit);
  }
  ++next_read_;
  return tensor;
}

absl::Status FullModelStream::Finish() {
  while (next_gather_ < plan_.unit_order.size()) {
    RETURN_IF_ERROR(GatherNextUnit(/*to_host=*/false));  // not read: no host copy
    held_.erase(plan_.unit_order[next_gather_ - 1]);
  }
  held_.clear();
  held_floats_ = 0;
  return broken_;
}

}  // namespace shardwise::fsdp
