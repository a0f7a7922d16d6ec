#include "contracts/prefetch_plan.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardwise {
namespace {

absl::Status CheckOrder(const google::protobuf::RepeatedField<int32_t>& order, const char* name,
                        int num_units) {
  std::set<int> seen;
  for (int unit : order) {
    if (unit < 0 || unit >= num_units) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " order names unit ", unit, "; the model has ", num_units));
    }
    if (!seen.insert(unit).second) {
      return absl::InvalidArgumentError(absl::StrCat(name, " order names unit ", unit, " twice"));
    }
  }
  return absl::OkStatus();
}

std::string Join(const google::protobuf::RepeatedField<int32_t>& units) {
  return absl::StrCat("[", absl::StrJoin(units, ", "), "]");
}

}  // namespace

absl::StatusOr<v1::PrefetchPlan> PlanPrefetch(const v1::ExecutionOrder& order,
                                              const v1::FsdpConfig& fsdp, int num_units) {
  if (absl::Status s = CheckOrder(order.pre_forward(), "pre-forward", num_units); !s.ok()) return s;
  if (absl::Status s = CheckOrder(order.post_forward(), "post-forward", num_units); !s.ok()) {
    return s;
  }
  if (std::set<int>(order.pre_forward().begin(), order.pre_forward().end()) !=
      std::set<int>(order.post_forward().begin(), order.post_forward().end())) {
    return absl::InvalidArgumentError(
        "the pre-forward and post-forward orders hold different units");
  }
  v1::PrefetchPlan plan;
  plan.set_backward_prefetch(fsdp.backward_prefetch() ==
                                     v1::BackwardPrefetch::BACKWARD_PREFETCH_UNSPECIFIED
                                 ? v1::BackwardPrefetch::BACKWARD_PRE
                                 : fsdp.backward_prefetch());
  plan.set_forward_prefetch(fsdp.forward_prefetch());
  plan.set_max_all_gathers_in_flight(!fsdp.has_limit_all_gathers() || fsdp.limit_all_gathers() ? 2
                                                                                               : 0);
  plan.mutable_forward_target()->Resize(num_units, -1);
  plan.mutable_backward_target()->Resize(num_units, -1);
  if (plan.forward_prefetch()) {
    for (int i = 0; i + 1 < order.pre_forward_size(); ++i) {
      plan.set_forward_target(order.pre_forward(i), order.pre_forward(i + 1));
    }
  }
  if (plan.backward_prefetch() != v1::BackwardPrefetch::NONE) {
    for (int i = 1; i < order.post_forward_size(); ++i) {
      plan.set_backward_target(order.post_forward(i), order.post_forward(i - 1));
    }
  }
  return plan;
}

std::string FirstDifference(const v1::ExecutionOrder& a, const v1::ExecutionOrder& b) {
  for (const auto& [name, x, y] :
       {std::make_tuple("pre-forward", &a.pre_forward(), &b.pre_forward()),
        std::make_tuple("post-forward", &a.post_forward(), &b.post_forward())}) {
    const int n = std::max(x->size(), y->size());
    for (int i = 0; i < n; ++i) {
      const std::string left = i < x->size() ? absl::StrCat("unit ", x->Get(i)) : "nothing";
      const std::string right = i < y->size() ? absl::StrCat("unit ", y->Get(i)) : "nothing";
      if (left != right) {
        return absl::StrCat(name, " position ", i, " (", left, " vs ", right, ")");
      }
    }
  }
  return "";
}

std::vector<Prefetch> SimulatePrefetches(const v1::PrefetchPlan& plan,
                                         const std::vector<HookEvent>& events) {
  const int n = plan.forward_target_size();
  // Per pass: whether a unit still needs its own unshard, and whether it was prefetched.
  std::vector<bool> needs_forward(n, true), needs_backward(n, true);
  std::vector<bool> prefetched_forward(n, false), prefetched_backward(n, false);
  std::vector<Prefetch> issued;
  auto consider = [&](const HookEvent& trigger, int target, std::vector<bool>& needs,
                      std::vector<bool>& prefetched) {
    if (target < 0 || !needs[target] || prefetched[target]) return;
    prefetched[target] = true;
    issued.push_back({trigger, target});
  };
  for (const HookEvent& e : events) {
    if (e.unit < 0 || e.unit >= n) continue;
    switch (e.point) {
      case HookPoint::kPreForward:
        needs_forward[e.unit] = false;
        if (plan.forward_prefetch()) {
          consider(e, plan.forward_target(e.unit), needs_forward, prefetched_forward);
        }
        break;
      case HookPoint::kPreBackward:
        needs_backward[e.unit] = false;
        if (plan.backward_prefetch() == v1::BackwardPrefetch::BACKWARD_PRE) {
          consider(e, plan.backward_target(e.unit), needs_backward, prefetched_backward);
        }
        break;
      case HookPoint::kPostBackward:
        if (plan.backward_prefetch() == v1::BackwardPrefetch::BACKWARD_POST) {
          consider(e, plan.backward_target(e.unit), needs_backward, prefetched_backward);
        }
        break;
    }
  }
  return issued;
}

std::string FormatExecutionOrder(const v1::ExecutionOrder& order) {
  return absl::StrCat("pre-forward ", Join(order.pre_forward()), ", post-forward ",
                      Join(order.post_forward()));
}

std::string FormatPrefetchPlan(const v1::PrefetchPlan& plan) {
  std::vector<std::string> forward, backward;
  for (int u = 0; u < plan.forward_target_size(); ++u) {
    if (plan.forward_target(u) >= 0)
      forward.push_back(absl::StrCat(u, "->", plan.forward_target(u)));
    if (plan.backward_target(u) >= 0) {
      backward.push_back(absl::StrCat(u, "->", plan.backward_target(u)));
    }
  }
  return absl::StrCat(
      "v", plan.version(), ": backward ",
      v1::BackwardPrefetch::Value_Name(plan.backward_prefetch()), " [",
      absl::StrJoin(backward, ", "), "], forward ",
      plan.forward_prefetch() ? absl::StrCat("[", absl::StrJoin(forward, ", "), "]") : "off",
      ", all-gathers in flight ",
      plan.max_all_gathers_in_flight() > 0 ? absl::StrCat("<= ", plan.max_all_gathers_in_flight())
                                           : std::string("unlimited"));
}

}  // namespace shardwise
