#ifndef SHARDWISE_CONTRACTS_PREFETCH_PLAN_H_
#define SHARDWISE_CONTRACTS_PREFETCH_PLAN_H_

// FSDP's prefetching, derived from a recorded execution order (docs/semantics.md, "Execution
// order and prefetch"; PyTorch's _get_handle_to_prefetch and _exec_order_utils):
// - forward prefetch (opt-in): in a unit's pre-forward, the next unit in pre-forward order;
// - backward prefetch: the unit before it in post-forward order, issued in the unit's
//   pre-backward hook (BACKWARD_PRE) or post-backward hook (BACKWARD_POST); NONE issues none;
// - limit_all_gathers: at most two all-gathered units in flight.
// A target is prefetched only if it still needs unsharding in that pass and is not
// already prefetched. Pure functions, shared by the coordinator (which stores and shows
// the plan) and the workers (which follow it).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// The plan for `order` over units 0..num_units-1. INVALID_ARGUMENT if an order names a
// unit out of range or twice, or the two orders hold different units.
absl::StatusOr<v1::PrefetchPlan> PlanPrefetch(const v1::ExecutionOrder& order,
                                              const v1::FsdpConfig& fsdp, int num_units);

// The first position where two orders differ, as "pre-forward position 2 (unit 1 vs unit
// 3)"; empty if they are equal.
std::string FirstDifference(const v1::ExecutionOrder& a, const v1::ExecutionOrder& b);

// One iteration's hooks, in the order they fire.
enum class HookPoint { kPreForward, kPreBackward, kPostBackward };
struct HookEvent {
  HookPoint point;
  int unit;
};
struct Prefetch {
  HookEvent trigger;
  int target;
};

// The prefetches `plan` issues when the hooks fire in `events` order.
std::vector<Prefetch> SimulatePrefetches(const v1::PrefetchPlan& plan,
                                         const std::vector<HookEvent>& events);

// "0 1 2 | 2 1 0"-style text for describe: "pre-forward [4, 0, 1, 2, 3], post-forward ...".
std::string FormatExecutionOrder(const v1::ExecutionOrder& order);
std::string FormatPrefetchPlan(const v1::PrefetchPlan& plan);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_PREFETCH_PLAN_H_
