#include "server/execution_order_agreement.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "contracts/job_state.h"
#include "contracts/model_description.h"
#include "contracts/prefetch_plan.h"

namespace shardwise {
namespace {

// The job's unit count, from its own model and wrap policy (as the ranks cut it), never
// from a report: a unit id a rank sends is checked against it (PlanPrefetch), so one
// report naming unit 2,000,000,000 cannot size a plan of that many units.
absl::StatusOr<int> NumUnits(const v1::JobSpec& spec) {
  ASSIGN_OR_RETURN(const ModelDescription model, DescribeModel(spec.model()));
  ASSIGN_OR_RETURN(const UnitAssignment units, AssignUnits(model, spec.wrap()));
  return units.num_units;
}

}  // namespace

ExecutionOrderAgreement::Decision ExecutionOrderAgreement::OnReport(
    const v1::Job& job, const v1::AttemptReport& report) {
  if (report.phase() == v1::ORDER_RECORDED) {
    return OnFirstOrder(job, report.rank(), report.execution_order());
  }
  if (report.phase() != v1::ORDER_CHANGED) return {};
  // Ranks report independently: a fast rank's change can arrive before a slow rank's
  // first order. Compare it only once the reference order is recorded.
  if (!recorded_) {
    if (!early_change_.has_value()) early_change_ = report;
    return {};
  }
  return OnChange(job, report);
}

ExecutionOrderAgreement::Decision ExecutionOrderAgreement::OnFirstOrder(
    const v1::Job& job, int32_t rank, const v1::ExecutionOrder& order) {
  if (recorded_ || rank < 0 || rank >= world_size_) return {};
  first_orders_[rank] = order;
  if (static_cast<int32_t>(first_orders_.size()) < world_size_) return {};
  const auto& [first_rank, reference] = *first_orders_.begin();
  std::vector<std::string> differences;
  for (const auto& [other, other_order] : first_orders_) {
    const std::string difference = FirstDifference(reference, other_order);
    if (!difference.empty()) {
      differences.push_back(
          absl::StrCat("rank ", other, " differs from rank ", first_rank, " at ", difference));
    }
  }
  Decision decision;
  if (!differences.empty()) {
    decision.kind = Decision::Kind::kFail;
    decision.message = absl::StrCat(
        "the ranks ran their FSDP units in different orders in their first iteration: ",
        absl::StrJoin(differences, "; "),
        "; their collectives would pair up wrongly (a hang, or mixed tensors)");
    return decision;
  }
  auto plan = Plan(job, reference);
  if (!plan.ok()) {
    // Nothing to follow: the ranks keep running without prefetch, as before an order.
    decision.kind = Decision::Kind::kWarn;
    decision.message =
        absl::StrCat("the execution order cannot be planned: ", plan.status().message());
    return decision;
  }
  plan->set_version(1);
  decision.kind = Decision::Kind::kRecord;
  decision.order = reference;
  decision.plan = *plan;
  decision.message = absl::StrCat("execution order recorded, the same on all ", world_size_,
                                  " ranks: ", FormatExecutionOrder(reference), "; prefetch plan ",
                                  FormatPrefetchPlan(*plan));
  return decision;
}

ExecutionOrderAgreement::Decision ExecutionOrderAgreement::Recorded(const v1::Job& job) {
  recorded_ = true;
  first_orders_.clear();
  if (!early_change_.has_value()) return {};
  const v1::AttemptReport change = *early_change_;
  early_change_.reset();
  return OnChange(job, change);
}

ExecutionOrderAgreement::Decision ExecutionOrderAgreement::OnChange(
    const v1::Job& job, const v1::AttemptReport& report) {
  if (change_warned_) return {};
  change_warned_ = true;
  const std::string change = absl::StrCat(
      "warning: ", RankName(job, report.rank()), "'s execution order changed at step ",
      report.step(), ": ", FirstDifference(job.execution_order(), report.execution_order()),
      " (warned once per attempt)");
  // Re-planned from the new order; if it cannot be planned, the old plan stays.
  auto plan = Plan(job, report.execution_order());
  Decision decision;
  if (!plan.ok()) {
    decision.kind = Decision::Kind::kWarn;
    decision.message = absl::StrCat(change, "; ", plan.status().message());
    return decision;
  }
  decision.kind = Decision::Kind::kReplan;
  decision.order = job.execution_order();  // the reference stays the first iteration's
  decision.plan = *plan;
  decision.plan.set_version(job.prefetch_plan().version() + 1);
  decision.message =
      absl::StrCat(change, "; re-planned: prefetch plan ", FormatPrefetchPlan(decision.plan));
  return decision;
}

absl::StatusOr<v1::PrefetchPlan> ExecutionOrderAgreement::Plan(const v1::Job& job,
                                                               const v1::ExecutionOrder& order) {
  if (!num_units_.has_value()) num_units_ = NumUnits(job.spec());
  if (!num_units_->ok()) return num_units_->status();
  return PlanPrefetch(order, job.spec().fsdp(), **num_units_);
}

}  // namespace shardwise
