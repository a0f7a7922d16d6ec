// The prefetch planner against PyTorch's counts: nn.Transformer wrapped per layer (6
// encoder + 6 decoder units under a root that owns parameters) makes 12 prefetches with
// BACKWARD_PRE and 11 with BACKWARD_POST (SEMANTICS.md); NONE makes none; forward
// prefetch targets the next unit in pre-forward order.

#include "common/prefetch_plan.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

constexpr int kRoot = 12;  // units 0-11 are the layers, 12 the root

// Pre-forward: the root first, then the layers; post-forward: the layers, then the root.
v1::ExecutionOrder ChainOrder() {
  v1::ExecutionOrder order;
  order.add_pre_forward(kRoot);
  for (int u = 0; u < 12; ++u) {
    order.add_pre_forward(u);
    order.add_post_forward(u);
  }
  order.add_post_forward(kRoot);
  return order;
}

// nn.Transformer's backward: the root's pre-backward fires first (on its outputs), each
// layer's pre- and post-backward in reverse, the root's post-backward last (its norms'
// gradients complete last).
std::vector<HookEvent> TransformerBackward() {
  std::vector<HookEvent> events = {{HookPoint::kPreBackward, kRoot}};
  for (int u = 11; u >= 0; --u) {
    events.push_back({HookPoint::kPreBackward, u});
    events.push_back({HookPoint::kPostBackward, u});
  }
  events.push_back({HookPoint::kPostBackward, kRoot});
  return events;
}

v1::FsdpConfig Fsdp(v1::BackwardPrefetch::Value backward, bool forward = false) {
  v1::FsdpConfig fsdp;
  fsdp.set_backward_prefetch(backward);
  fsdp.set_forward_prefetch(forward);
  return fsdp;
}

TEST(PrefetchPlan, BackwardPreMakesTwelvePrefetches) {
  auto plan = PlanPrefetch(ChainOrder(), Fsdp(v1::BackwardPrefetch::BACKWARD_PRE), 13);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<Prefetch> issued = SimulatePrefetches(*plan, TransformerBackward());
  ASSERT_EQ(issued.size(), 12u);
  // root -> 11, 11 -> 10, ..., 1 -> 0, each in a pre-backward hook.
  int expected_trigger = kRoot, expected_target = 11;
  for (const Prefetch& p : issued) {
    EXPECT_EQ(p.trigger.point, HookPoint::kPreBackward);
    EXPECT_EQ(p.trigger.unit, expected_trigger);
    EXPECT_EQ(p.target, expected_target);
    expected_trigger = expected_target--;
  }
}

TEST(PrefetchPlan, BackwardPostMakesEleven) {
  auto plan = PlanPrefetch(ChainOrder(), Fsdp(v1::BackwardPrefetch::BACKWARD_POST), 13);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<Prefetch> issued = SimulatePrefetches(*plan, TransformerBackward());
  ASSERT_EQ(issued.size(), 11u);
  // 11 -> 10, ..., 1 -> 0 in post-backward hooks; the root's post-backward comes last,
  // when its target (11) no longer needs unsharding.
  for (size_t i = 0; i < issued.size(); ++i) {
    EXPECT_EQ(issued[i].trigger.point, HookPoint::kPostBackward);
    EXPECT_EQ(issued[i].trigger.unit, 11 - static_cast<int>(i));
    EXPECT_EQ(issued[i].target, 10 - static_cast<int>(i));
  }
}

TEST(PrefetchPlan, NoneMakesNone) {
  auto plan = PlanPrefetch(ChainOrder(), Fsdp(v1::BackwardPrefetch::NONE), 13);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(SimulatePrefetches(*plan, TransformerBackward()).empty());
  for (int target : plan->backward_target()) EXPECT_EQ(target, -1);
}

TEST(PrefetchPlan, ForwardPrefetchTargetsTheNextUnit) {
  auto plan = PlanPrefetch(ChainOrder(), Fsdp(v1::BackwardPrefetch::NONE, true), 13);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->forward_target(kRoot), 0);
  for (int u = 0; u < 11; ++u) EXPECT_EQ(plan->forward_target(u), u + 1);
  EXPECT_EQ(plan->forward_target(11), -1);
  std::vector<HookEvent> forward;
  const v1::ExecutionOrder order = ChainOrder();
  for (int unit : order.pre_forward()) forward.push_back({HookPoint::kPreForward, unit});
  EXPECT_EQ(SimulatePrefetches(*plan, forward).size(), 12u);
  // Off by default.
  auto off = PlanPrefetch(ChainOrder(), v1::FsdpConfig(), 13);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->forward_target(kRoot), -1);
  EXPECT_EQ(off->backward_prefetch(), v1::BackwardPrefetch::BACKWARD_PRE);
  EXPECT_EQ(off->max_all_gathers_in_flight(), 2);
}

TEST(PrefetchPlan, RefusesBadOrders) {
  v1::ExecutionOrder order = ChainOrder();
  order.set_pre_forward(3, 40);
  EXPECT_EQ(PlanPrefetch(order, v1::FsdpConfig(), 13).status().message(),
            "pre-forward order names unit 40; the model has 13");
  order = ChainOrder();
  order.set_post_forward(1, 0);
  EXPECT_EQ(PlanPrefetch(order, v1::FsdpConfig(), 13).status().message(),
            "post-forward order names unit 0 twice");
}

TEST(PrefetchPlan, FirstDifferenceNamesThePosition) {
  v1::ExecutionOrder a = ChainOrder(), b = ChainOrder();
  EXPECT_EQ(FirstDifference(a, b), "");
  b.set_pre_forward(2, 7);
  EXPECT_EQ(FirstDifference(a, b), "pre-forward position 2 (unit 1 vs unit 7)");
  b = ChainOrder();
  b.mutable_post_forward()->RemoveLast();
  EXPECT_EQ(FirstDifference(a, b), "post-forward position 12 (unit 12 vs nothing)");
}

}  // namespace
}  // namespace shardwise
