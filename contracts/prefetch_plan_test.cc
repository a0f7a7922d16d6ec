// The prefetch planner against PyTorch's counts: nn.Transformer wrapped per layer (6
// encoder + 6 decoder units under a root that owns parameters) makes 12 prefetches with
// BACKWARD_PRE and 11 with BACKWARD_POST (docs/semantics.md); NONE makes none; forward
// prefetch targets the next unit in pre-forward order.

#include "contracts/prefetch_plan.h"

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

// A 2-layer GPT wrapped per block: units 0 and 1 are transformer.h.0 and h.1, unit 2
// the root (wte, wpe, ln_f, and the head tied to wte). The root's pre-forward comes first
// (it wraps the model; its embeddings run first) and its post-forward last (ln_f and the
// head run last): pre-forward [2, 0, 1], post-forward [0, 1, 2]. In backward the root's
// pre-backward fires first (the head) and its post-backward last (the embeddings).
v1::ExecutionOrder TwoLayerGptOrder() {
  v1::ExecutionOrder order;
  for (int u : {2, 0, 1}) order.add_pre_forward(u);
  for (int u : {0, 1, 2}) order.add_post_forward(u);
  return order;
}

const std::vector<HookEvent> kTwoLayerGptBackward = {
    {HookPoint::kPreBackward, 2}, {HookPoint::kPreBackward, 1},  {HookPoint::kPostBackward, 1},
    {HookPoint::kPreBackward, 0}, {HookPoint::kPostBackward, 0}, {HookPoint::kPostBackward, 2}};

TEST(PrefetchPlan, TwoLayerGpt) {
  auto pre = PlanPrefetch(TwoLayerGptOrder(), Fsdp(v1::BackwardPrefetch::BACKWARD_PRE, true), 3);
  ASSERT_TRUE(pre.ok()) << pre.status();
  // Backward: each unit prefetches the one before it in post-forward order.
  EXPECT_EQ(std::vector<int>(pre->backward_target().begin(), pre->backward_target().end()),
            (std::vector<int>{-1, 0, 1}));
  // Forward: the next in pre-forward order.
  EXPECT_EQ(std::vector<int>(pre->forward_target().begin(), pre->forward_target().end()),
            (std::vector<int>{1, -1, 0}));
  // BACKWARD_PRE: the head's pre-backward prefetches h.1, h.1's prefetches h.0.
  const std::vector<Prefetch> issued = SimulatePrefetches(*pre, kTwoLayerGptBackward);
  ASSERT_EQ(issued.size(), 2u);
  EXPECT_EQ(issued[0].trigger.unit, 2);
  EXPECT_EQ(issued[0].target, 1);
  EXPECT_EQ(issued[1].trigger.unit, 1);
  EXPECT_EQ(issued[1].target, 0);
  // BACKWARD_POST: h.1's post-backward prefetches h.0; the root's comes last, when its
  // target (h.1) needs nothing more in this pass, so it prefetches nothing.
  auto post = PlanPrefetch(TwoLayerGptOrder(), Fsdp(v1::BackwardPrefetch::BACKWARD_POST), 3);
  ASSERT_TRUE(post.ok());
  const std::vector<Prefetch> post_issued = SimulatePrefetches(*post, kTwoLayerGptBackward);
  ASSERT_EQ(post_issued.size(), 1u);
  EXPECT_EQ(post_issued[0].trigger.point, HookPoint::kPostBackward);
  EXPECT_EQ(post_issued[0].trigger.unit, 1);
  EXPECT_EQ(post_issued[0].target, 0);
}

}  // namespace
}  // namespace shardwise
