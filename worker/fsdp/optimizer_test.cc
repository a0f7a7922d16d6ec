#include "worker/fsdp/optimizer.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/compute/pointwise.h"

namespace shardwise::fsdp {
namespace {

TEST(Sgd, MomentumBufferStartsAsTheFirstGradient) {
  v1::OptimizerSpec spec;
  spec.mutable_sgd()->set_lr(0.1);
  spec.mutable_sgd()->set_momentum(0.9);
  spec.mutable_sgd()->set_dampening(0.5);
  spec.mutable_sgd()->set_weight_decay(0.01);
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  auto sgd = Optimizer::Create(spec, 1, &device);
  float p = 1.0f;
  const float g = 0.5f;
  sgd->BeginStep();
  sgd->Update(0, &p, &g, 1);
  // g' = 0.5 + 0.01 * 1 = 0.51; b = g' (no dampening on the first step); p = 1 - 0.051.
  EXPECT_NEAR(p, 1.0f - 0.1f * 0.51f, 1e-7);
  const float p1 = p;
  sgd->BeginStep();
  sgd->Update(0, &p, &g, 1);
  const float g2 = 0.5f + 0.01f * p1;
  const float b2 = 0.9f * 0.51f + 0.5f * g2;
  EXPECT_NEAR(p, p1 - 0.1f * b2, 1e-7);
  EXPECT_GT(allocator.Stats().live(MemoryCategory::kOptimizerState), 0);
}

// 1 - dampening is torch's Python float, rounded once: for 0.6, float(0.4), one ulp from
// 1 - float(0.6).
TEST(Sgd, OneMinusDampeningIsComputedInDouble) {
  ASSERT_NE(static_cast<float>(1 - 0.6), 1.0f - static_cast<float>(0.6));
  v1::OptimizerSpec spec;
  spec.mutable_sgd()->set_lr(1.0);
  spec.mutable_sgd()->set_momentum(0.5);
  spec.mutable_sgd()->set_dampening(0.6);
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  auto sgd = Optimizer::Create(spec, 1, &device);
  float p = 0.0f;
  const float zero = 0.0f, one = 1.0f;
  sgd->BeginStep();
  sgd->Update(0, &p, &zero, 1);  // b = g = 0, p = 0
  sgd->BeginStep();
  sgd->Update(0, &p, &one, 1);  // b = 0.5 * 0 + (1 - 0.6) * 1, p = -b
  EXPECT_EQ(p, -static_cast<float>(1 - 0.6));
}

// What a fault-tolerant heal gives a rank without state (worker/train/trainer.cc,
// MatchOptimizerLayout): the names its optimizer's segments have once stepped.
TEST(Optimizer, StateNamesAreThoseOfASteppedSegment) {
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  v1::OptimizerSpec sgd;
  sgd.mutable_sgd()->set_lr(0.1);
  sgd.mutable_sgd()->set_momentum(0.9);
  v1::OptimizerSpec adamw;
  adamw.mutable_adamw()->set_lr(0.1);
  for (const v1::OptimizerSpec& spec : {sgd, adamw}) {
    auto optimizer = Optimizer::Create(spec, 1, &device);
    EXPECT_TRUE(optimizer->SegmentState(0).empty());  // none before the first step
    float p = 1.0f;
    const float g = 0.5f;
    optimizer->BeginStep();
    optimizer->Update(0, &p, &g, 1);
    std::vector<std::string> stepped;
    for (const auto& [name, buffer] : optimizer->SegmentState(0)) stepped.push_back(name);
    EXPECT_EQ(Optimizer::StateNames(spec), stepped) << spec.DebugString();
  }
}

TEST(Sgd, Nesterov) {
  v1::OptimizerSpec spec;
  spec.mutable_sgd()->set_lr(1.0);
  spec.mutable_sgd()->set_momentum(0.5);
  spec.mutable_sgd()->set_nesterov(true);
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  auto sgd = Optimizer::Create(spec, 1, &device);
  float p = 0.0f;
  const float g = 1.0f;
  sgd->BeginStep();
  sgd->Update(0, &p, &g, 1);
  EXPECT_NEAR(p, -(1.0f + 0.5f * 1.0f), 1e-7);  // g + mu * b with b = g
}

TEST(AdamW, TwoStepsByHand) {
  v1::OptimizerSpec spec;
  spec.mutable_adamw()->set_lr(0.1);
  spec.mutable_adamw()->set_weight_decay(0.1);
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  auto adamw = Optimizer::Create(spec, 1, &device);
  float p = 1.0f;
  double m = 0, v = 0, expected = 1.0;
  for (int t = 1; t <= 2; ++t) {
    const float g = t == 1 ? 0.2f : -0.4f;
    adamw->BeginStep();
    adamw->Update(0, &p, &g, 1);
    expected *= 1 - 0.1 * 0.1;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    const double m_hat = m / (1 - std::pow(0.9, t));
    const double v_hat = v / (1 - std::pow(0.999, t));
    expected -= 0.1 * m_hat / (std::sqrt(v_hat) + 1e-8);
    EXPECT_NEAR(p, expected, 1e-6) << "step " << t;
  }
}

// A segment's ranges stepped together (UpdateSpans: one device call) or one by one
// (UpdateRange): the same bits, decay where a range has it, over three steps.
TEST(AdamW, SpansStepAsTheirRangesDo) {
  v1::OptimizerSpec spec;
  spec.mutable_adamw()->set_lr(0.05);
  spec.mutable_adamw()->set_weight_decay(0.1);
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  auto together = Optimizer::Create(spec, 1, &device);
  auto apart = Optimizer::Create(spec, 1, &device);
  const std::vector<UpdateSpan> spans = {
      {0, 5, false}, {5, 40, true}, {40, 41, false}, {41, 41, true}, {41, 64, true}};
  std::vector<float> p_together(64), p_apart(64), grad(64);
  for (int i = 0; i < 64; ++i) p_together[i] = p_apart[i] = 0.01f * static_cast<float>(i - 30);
  for (int step = 1; step <= 3; ++step) {
    for (int i = 0; i < 64; ++i) grad[i] = 0.1f * static_cast<float>((i * 7 + step) % 11 - 5);
    together->BeginStep();
    apart->BeginStep();
    together->UpdateSpans(0, 64, spans, p_together.data(), grad.data());
    for (const UpdateSpan& span : spans) {
      apart->UpdateRange(0, 64, span.begin, span.end, p_apart.data(), grad.data(), span.decay);
    }
    ASSERT_EQ(p_together, p_apart) << "step " << step;
  }
}

// Torch's FP32 operations, each rounded: sqrt, + 1e-6, reciprocal, times max_norm. The
// quotient in double, rounded once, is an ulp below at this sum (0x3DE9FA9A, not 0x3DE9FA9B).
TEST(ClipCoefficient, IsTorchsFp32ReciprocalTimesTheBoundCappedAtOne) {
  EXPECT_EQ(pointwise::ClipCoefficient(76.61368560791016f, 1.0), 0.11424752324819565f);
  EXPECT_NE(0.11424752324819565f, static_cast<float>(1.0 / (std::sqrt(76.61368560791016) + 1e-6)));
  EXPECT_EQ(pointwise::ClipCoefficient(100.0f, 2.0), (1.0f / (10.0f + 1e-6f)) * 2.0f);
  EXPECT_EQ(pointwise::ClipCoefficient(0.25f, 1.0), 1.0f);
  EXPECT_EQ(pointwise::ClipCoefficient(std::nanf(""), 1.0), 1.0f);  // gradients left as they are
}

// The device's clipping ops as FsdpModel chains them: squares summed over two ranges into
// one double, narrowed to FP32, then every element scaled only when the norm is over.
TEST(ClipToNorm, ScalesByTheCoefficientOfTheAccumulatedNorm) {
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  std::vector<float> a = {3.0f, 0.0f}, b = {4.0f};
  double sum = 0.5;  // what an earlier range added
  device.AddSquaredNorm(a.data(), a.size(), &sum);
  device.AddSquaredNorm(b.data(), b.size(), &sum);
  EXPECT_EQ(sum, 25.5);
  float squares = 0;
  device.DoubleToFloat(&sum, &squares, 1);
  EXPECT_EQ(squares, 25.5f);
  squares = 25.0f;  // a norm of 5
  device.ClipToNorm(a.data(), a.size(), &squares, 1.0);
  const float coef = 1.0f / (5.0f + 1e-6f);
  EXPECT_EQ(a[0], 3.0f * coef);
  EXPECT_EQ(a[1], 0.0f);
  device.ClipToNorm(b.data(), b.size(), &squares, 10.0);  // under the bound: unchanged
  EXPECT_EQ(b[0], 4.0f);
}

// Gradients holding FP16 values (keep_low_precision_grads) are scaled as torch scales an
// FP16 tensor: grad.mul_(coef.to(grad.dtype)), the coefficient rounded to FP16
// (0.199951171875), then each product (3 * that: 0.599609375; rounding the product only
// would give 0.60009765625).
TEST(ClipToNorm, SixteenBitGradientsScaleByTheRoundedCoefficientAndRound) {
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  const float squares = 25.0f;  // a norm of 5: a coefficient of 0.19999996
  std::vector<float> g = {3.0f};
  device.ClipToNorm(g.data(), g.size(), &squares, 1.0, ScalarType::kFloat16);
  EXPECT_EQ(g[0], 0.599609375f);
}

}  // namespace
}  // namespace shardwise::fsdp
