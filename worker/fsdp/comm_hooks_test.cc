// The communication hooks, each against a float64 reference that rounds at the same
// points (a 16-bit sum may round after every addition, in the ring's order, so the
// reference bounds that error rather than guessing the order), at world sizes 2, 3 and 4
// over real Gloo; and fp16_compress == fp16_compress_wrapper(allreduce) bit for bit.

#include "worker/fsdp/comm_hooks.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/solo_communicator.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/testing/plan_groups.h"

namespace shardwise::fsdp {
namespace {

using Strategy = v1::ShardingStrategy::Value;

constexpr int64_t kNumel = 1000;  // not a multiple of 3 or 4: the sharded cases pad
constexpr ScalarType kF32 = ScalarType::kFloat32;
constexpr ScalarType kF16 = ScalarType::kFloat16;
constexpr ScalarType kBF16 = ScalarType::kBFloat16;

// Rank r's gradient: values spread over five decades, different on every rank.
std::vector<float> Gradient(int rank, int64_t padded) {
  std::mt19937 rng(17 + rank);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> decade(-3, 2);
  std::vector<float> g(padded, 0.0f);
  for (int64_t i = 0; i < kNumel; ++i) g[i] = normal(rng) * std::pow(10.0f, decade(rng));
  return g;
}

double Round(ScalarType type, double value) {
  float f = static_cast<float>(value);
  cpu::RoundToPrecision(type, &f, 1);
  return f;
}

double Epsilon(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat16:
      return std::ldexp(1.0, -10);
    case ScalarType::kBFloat16:
      return std::ldexp(1.0, -7);
    default:
      return std::ldexp(1.0, -23);
  }
}

struct HookCase {
  std::string name;
  Strategy strategy;
  v1::CommHook::Hook hook;
  v1::CommHook::Wrapper wrapper;
  ScalarType param, reduce;  // MixedPrecision's param_dtype and effective reduce_dtype
  // The coarsest dtype any rounding point after the sum uses: the bound on how far the
  // ring's order of additions (and one final rounding flipped by it) can move the result.
  ScalarType bound_type;
  std::function<double(double g, int world, double pre)> before_sum;
  std::function<double(double sum, int world, double post)> after_sum;
  bool keep_low_precision_grads = false;
};

void PrintTo(const HookCase& c, std::ostream* os) { *os << c.name; }

struct RankResult {
  std::vector<float> reduced;  // this rank's reduced shard (the whole gradient unsharded)
  absl::Status status;
};

// Runs ReduceUnitGradient on every rank, each with its own Gloo communicators.
std::vector<RankResult> ReduceOnEveryRank(const HookCase& c, int world) {
  v1::FsdpConfig fsdp;
  fsdp.set_sharding_strategy(c.strategy);
  gloo::rendezvous::HashStore store;
  std::vector<RankResult> results(world);
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto plan = PlanSharding(fsdp, world, r);
      if (!plan.ok()) {
        results[r].status = plan.status();
        return;
      }
      auto groups = testing::ConnectPlanGroups(store, *plan, r);
      if (!groups.ok()) {
        results[r].status = groups.status();
        return;
      }
      CpuCachingAllocator allocator;
      CpuDevice device(&allocator);
      ReductionContext context;
      context.plan = &*plan;
      context.groups = {groups->shard.get(), groups->replicate.get()};
      context.device = &device;
      context.param_type = c.param;
      context.reduce_type = c.reduce;
      context.keep_low_precision_grads = c.keep_low_precision_grads;
      const int64_t padded = PaddedNumel(kNumel, plan->shard_size);
      std::vector<float> grad = Gradient(r, padded);
      cpu::RoundToPrecision(c.param, grad.data(), grad.size());
      const int64_t shard_numel = padded / plan->shard_size;
      results[r].reduced.resize(shard_numel);
      v1::CommHook hook;
      hook.set_hook(c.hook);
      hook.set_wrapper(c.wrapper);
      if (IsMixedPrecisionHook(hook)) {
        auto bucket = MixedPrecisionAllReduce(context, grad.data(), shard_numel);
        if (!bucket.ok()) {
          results[r].status = bucket.status();
          return;
        }
        MixedPrecisionFinish(context, *bucket, results[r].reduced.data());
      } else {
        results[r].status =
            ReduceUnitGradient(hook, context, grad.data(), shard_numel, results[r].reduced.data());
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

class HookNumerics : public ::testing::TestWithParam<std::tuple<HookCase, int>> {};

TEST_P(HookNumerics, MatchesFloat64ReferenceWithTheSameRoundingPoints) {
  const auto& [c, world] = GetParam();
  std::vector<RankResult> results = ReduceOnEveryRank(c, world);
  double pre = 1, post = 1;
  DivideFactors(world, &pre, &post);
  const bool sharded = c.strategy != v1::ShardingStrategy::NO_SHARD;
  const int shard_size = sharded ? world : 1;
  const int64_t padded = PaddedNumel(kNumel, shard_size);
  const int64_t shard_numel = padded / shard_size;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < world; ++r) {
    inputs.push_back(Gradient(r, padded));
    cpu::RoundToPrecision(c.param, inputs.back().data(), padded);
  }
  int64_t exact = 0, compared = 0;
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(results[r].status.ok()) << results[r].status;
    const int64_t begin = sharded ? r * shard_numel : 0;
    for (int64_t i = 0; i < shard_numel; ++i) {
      double sum = 0, magnitude = 0;
      for (int q = 0; q < world; ++q) {
        const double term = c.before_sum(inputs[q][begin + i], world, pre);
        sum += term;
        magnitude += std::abs(term);
      }
      const double want = c.after_sum(sum, world, post);
      // Each of the world - 1 additions may round (half a unit each, relative to the
      // terms' magnitude), and the final rounding may then land on the neighbouring
      // value; FP16's subnormals round in absolute steps of 2^-24.
      const double eps = Epsilon(c.bound_type);
      const double bound = (world - 1) * 0.5 * eps * magnitude + eps * std::abs(want) +
                           (c.bound_type == kF16 ? world * std::ldexp(1.0, -24) : 0.0);
      ASSERT_NEAR(results[r].reduced[i], want, bound)
          << c.name << " world " << world << " rank " << r << " element " << i;
      exact += results[r].reduced[i] == static_cast<float>(want);
      ++compared;
    }
  }
  // With two ranks there is one addition, so no order to differ in: every element must
  // equal the reference exactly. With more, the ring's order of additions rounds some
  // elements differently (about 15-35% here), never most of them.
  const double fraction = static_cast<double>(exact) / compared;
  if (world == 2) {
    EXPECT_EQ(exact, compared) << c.name;
  } else {
    EXPECT_GE(fraction, 0.6) << c.name << " world " << world;
  }
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<HookCase, int>>& info) {
  return absl::StrCat(std::get<0>(info.param).name, "_world", std::get<1>(info.param));
}

// DDP's compress hook and wrapper: h(h(g) / N) summed in h, widened.
HookCase Compress(std::string name, v1::CommHook::Hook hook, v1::CommHook::Wrapper wrapper,
                  ScalarType low) {
  return {std::move(name),
          v1::ShardingStrategy::NO_SHARD,
          hook,
          wrapper,
          kF32,
          kF32,
          low,
          [low](double g, int n, double) { return Round(low, Round(low, g) / n); },
          [low](double sum, int, double) { return Round(low, sum); }};
}

// FSDP's low-precision hook on a sharded strategy: h(h(g) / pre), reduce-scattered in h,
// then h(sum / post).
HookCase LowPrecisionSharded(std::string name, Strategy strategy, v1::CommHook::Hook hook,
                             ScalarType low) {
  return {std::move(name),
          strategy,
          hook,
          v1::CommHook::NO_WRAPPER,
          kF32,
          kF32,
          low,
          [low](double g, int, double pre) { return Round(low, Round(low, g) / pre); },
          [low](double sum, int, double post) { return Round(low, Round(low, sum) / post); }};
}

INSTANTIATE_TEST_SUITE_P(
    EveryHook, HookNumerics,
    ::testing::Combine(
        ::testing::Values(
            HookCase{"AllReduce", v1::ShardingStrategy::NO_SHARD, v1::CommHook::ALLREDUCE,
                     v1::CommHook::NO_WRAPPER, kF32, kF32, kF32,
                     [](double g, int n, double) { return Round(kF32, g / n); },
                     [](double sum, int, double) { return sum; }},
            Compress("Fp16Compress", v1::CommHook::FP16_COMPRESS, v1::CommHook::NO_WRAPPER, kF16),
            Compress("Bf16Compress", v1::CommHook::BF16_COMPRESS, v1::CommHook::NO_WRAPPER, kBF16),
            Compress("Fp16WrapperAllReduce", v1::CommHook::ALLREDUCE, v1::CommHook::FP16_WRAPPER,
                     kF16),
            Compress("Bf16WrapperAllReduce", v1::CommHook::ALLREDUCE, v1::CommHook::BF16_WRAPPER,
                     kBF16),
            LowPrecisionSharded("FullShardFp16", v1::ShardingStrategy::FULL_SHARD,
                                v1::CommHook::FP16_COMPRESS, kF16),
            LowPrecisionSharded("ShardGradOpBf16", v1::ShardingStrategy::SHARD_GRAD_OP,
                                v1::CommHook::BF16_COMPRESS, kBF16),
            // A low-precision hook replaces reduce_dtype's cast: a BF16 reduce_dtype does not
            // round what FP16 compresses (nor an FP16 one overflow what BF16 compresses).
            HookCase{"Fp16CompressOverBf16Reduce", v1::ShardingStrategy::NO_SHARD,
                     v1::CommHook::FP16_COMPRESS, v1::CommHook::NO_WRAPPER, kF32, kBF16, kF16,
                     [](double g, int n, double) { return Round(kF16, Round(kF16, g) / n); },
                     [](double sum, int, double) { return Round(kF16, sum); }},
            // keep_low_precision_grads rounds a low-precision hook's result to param_dtype.
            HookCase{"FullShardFp16KeepsBf16Grads", v1::ShardingStrategy::FULL_SHARD,
                     v1::CommHook::FP16_COMPRESS, v1::CommHook::NO_WRAPPER, kBF16, kBF16, kBF16,
                     [](double g, int, double pre) { return Round(kF16, Round(kF16, g) / pre); },
                     [](double sum, int, double post) {
                       return Round(kBF16, Round(kF16, Round(kF16, sum) / post));
                     },
                     /*keep_low_precision_grads=*/true},
            // FSDP's own path in FP32: g / pre, reduce-scattered, / post.
            HookCase{"FullShardNoHook", v1::ShardingStrategy::FULL_SHARD, v1::CommHook::NO_HOOK,
                     v1::CommHook::NO_WRAPPER, kF32, kF32, kF32,
                     [](double g, int, double pre) { return Round(kF32, g / pre); },
                     [](double sum, int, double post) { return Round(kF32, sum / post); }},
            // DDP's mixed-precision hook: BF16 gradients summed in FP32 (reduce_dtype),
            // divided by N, copied into the BF16 gradient, upcast.
            HookCase{"MixedPrecisionBf16ReduceFp32", v1::ShardingStrategy::NO_SHARD,
                     v1::CommHook::MIXED_PRECISION, v1::CommHook::NO_WRAPPER, kBF16, kF32, kBF16,
                     [](double g, int, double) { return g; },
                     [](double sum, int n, double) {
                       return Round(kBF16, Round(kF32, Round(kF32, sum) / n));
                     }},
            // ... and with reduce_dtype = param_dtype: summed and divided in BF16.
            HookCase{
                "MixedPrecisionBf16", v1::ShardingStrategy::NO_SHARD, v1::CommHook::MIXED_PRECISION,
                v1::CommHook::NO_WRAPPER, kBF16, kBF16, kBF16,
                [](double g, int, double) { return g; },
                [](double sum, int n, double) { return Round(kBF16, Round(kBF16, sum) / n); }}),
        ::testing::Values(2, 3, 4)),
    CaseName);

// fp16_compress_hook is fp16_compress_wrapper(allreduce_hook): the same operations in the
// same order, so the same bits.
TEST(CompressWrapper, EqualsCompressHookBitForBit) {
  for (int world : {2, 3, 4}) {
    for (auto [hook, wrapper, low] :
         {std::make_tuple(v1::CommHook::FP16_COMPRESS, v1::CommHook::FP16_WRAPPER, kF16),
          std::make_tuple(v1::CommHook::BF16_COMPRESS, v1::CommHook::BF16_WRAPPER, kBF16)}) {
      HookCase compressed = Compress("hook", hook, v1::CommHook::NO_WRAPPER, low);
      HookCase wrapped = Compress("wrapper", v1::CommHook::ALLREDUCE, wrapper, low);
      std::vector<RankResult> a = ReduceOnEveryRank(compressed, world);
      std::vector<RankResult> b = ReduceOnEveryRank(wrapped, world);
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(a[r].status.ok() && b[r].status.ok());
        ASSERT_EQ(a[r].reduced.size(), b[r].reduced.size());
        EXPECT_EQ(std::memcmp(a[r].reduced.data(), b[r].reduced.data(),
                              a[r].reduced.size() * sizeof(float)),
                  0)
            << v1::CommHook::Hook_Name(hook) << " world " << world << " rank " << r;
      }
    }
  }
}

// The values' bit patterns: equal bits, not merely equal values (-0 and 0, NaN payloads).
std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// One rank reduces in place (reduced == grad), without collectives: the same bits as the
// collective path over groups of one, for FSDP's reduction in each reduce dtype, its
// low-precision hooks and DDP's, with divide factors that round (a job's own are 1 on
// one rank, but the rounding points must be the same whatever they are).
TEST(OneRank, InPlaceEqualsTheCollectivesBitForBit) {
  ShardingPlan plan;
  plan.predivide = 3;
  plan.postdivide = 7;
  SoloCommunicator shard, replicate;
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  const std::vector<float> gradient = Gradient(0, kNumel);
  for (auto [hook_kind, reduce] :
       {std::pair{v1::CommHook::NO_HOOK, kF32}, std::pair{v1::CommHook::NO_HOOK, kF16},
        std::pair{v1::CommHook::NO_HOOK, kBF16}, std::pair{v1::CommHook::FP16_COMPRESS, kF32},
        std::pair{v1::CommHook::BF16_COMPRESS, kF32}, std::pair{v1::CommHook::ALLREDUCE, kBF16}}) {
    for (bool keep_low_precision : {false, true}) {
      ReductionContext context;
      context.plan = &plan;
      context.groups = {&shard, &replicate};
      context.device = &device;
      context.param_type = kBF16;
      context.reduce_type = reduce;
      context.keep_low_precision_grads = keep_low_precision;
      v1::CommHook hook;
      hook.set_hook(hook_kind);
      std::vector<float> grad = gradient, collective(kNumel);
      ASSERT_TRUE(ReduceUnitGradient(hook, context, grad.data(), kNumel, collective.data()).ok());
      std::vector<float> in_place = gradient;
      ASSERT_TRUE(ReduceUnitGradient(hook, context, in_place.data(), kNumel, in_place.data()).ok());
      EXPECT_EQ(Bits(in_place), Bits(collective))
          << v1::CommHook::Hook_Name(hook_kind) << " reduce " << ScalarTypeName(reduce)
          << " keep_low_precision_grads " << keep_low_precision;
      // The rounding happened: a 16-bit reduce dtype changed some values.
      if (reduce != kF32 || hook_kind != v1::CommHook::NO_HOOK) {
        EXPECT_NE(Bits(in_place), Bits(gradient));
      }
    }
  }
}

// Over more than one rank a gradient cannot be reduced where it lies: refused, not
// silently left unreduced.
TEST(OneRank, InPlaceOverSeveralRanksIsRefused) {
  v1::FsdpConfig fsdp;
  fsdp.set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  auto plan = PlanSharding(fsdp, 2, 0);
  ASSERT_TRUE(plan.ok());
  SoloCommunicator shard, replicate;
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  ReductionContext context;
  context.plan = &*plan;
  context.groups = {&shard, &replicate};
  context.device = &device;
  std::vector<float> grad = Gradient(0, kNumel);
  const absl::Status status =
      ReduceUnitGradient(v1::CommHook(), context, grad.data(), kNumel, grad.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("2 ranks"), std::string::npos) << status;
}

// A group whose collectives' completion is scripted: a stream-ordered NCCL group in
// flight (`pending` polls), then done or failed, which this machine cannot run. Its
// reduce-scatter keeps chunk 0 (the values do not matter here); its all-reduce notes how
// often `before`'s completion had been polled when it was called.
class ScriptedGroup final : public Communicator {
 public:
  explicit ScriptedGroup(absl::StatusOr<bool> completed, int pending = 0)
      : completed_(std::move(completed)), pending_(pending) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  absl::Status AllGather(const void*, size_t, void*, ScalarType) override { return Unused(); }
  absl::Status ReduceScatter(void* in, size_t numel, void* shard, ScalarType type) override {
    std::memcpy(shard, in, numel * ElementSize(type));
    return absl::OkStatus();
  }
  absl::Status AllReduce(void*, size_t, ScalarType) override {
    before_polls_at_all_reduce = before == nullptr ? -1 : before->polls;
    return absl::OkStatus();
  }
  absl::Status Broadcast(void*, size_t, int, ScalarType) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }
  absl::StatusOr<bool> CollectivesCompleted() override {
    return ++polls <= pending_ ? absl::StatusOr<bool>(false) : completed_;
  }
  bool stream_ordered() const override { return ordered; }
  bool ordered = false;
  int polls = 0;
  const ScriptedGroup* before = nullptr;
  int before_polls_at_all_reduce = -1;

 private:
  static absl::Status Unused() { return absl::InternalError("not a collective test"); }
  absl::StatusOr<bool> completed_;
  int pending_;
};

// "true", "false" or the error's code.
std::string Answer(const absl::StatusOr<bool>& completed) {
  if (!completed.ok()) return absl::StatusCodeToString(completed.status().code());
  return *completed ? "true" : "false";
}

TEST(ReductionCollectivesCompleted, ReportsAFailureOnlyOnceEveryGroupHasSettled) {
  ScriptedGroup done(true), in_flight(false), failed(absl::UnavailableError("peer lost"));
  EXPECT_EQ(Answer(ReductionCollectivesCompleted({&done, &done})), "true");
  EXPECT_EQ(Answer(ReductionCollectivesCompleted({&done, nullptr})), "true");
  EXPECT_EQ(Answer(ReductionCollectivesCompleted({&in_flight, &done})), "false");
  // The failed group's error waits for the other group: its watchdog must keep running.
  EXPECT_EQ(Answer(ReductionCollectivesCompleted({&failed, &in_flight})), "false");
  EXPECT_EQ(Answer(ReductionCollectivesCompleted({&in_flight, &failed})), "false");
  EXPECT_EQ(Answer(ReductionCollectivesCompleted({&done, &failed})), "UNAVAILABLE");
  // Every group is polled each time, also after a failure.
  EXPECT_EQ(in_flight.polls, 3);
  EXPECT_EQ(failed.polls, 3);
}

// How often HYBRID's reduction polls the shard group's reduce-scatter (in flight for three
// polls) before it calls the replicate all-reduce, in FP32 and through a 16-bit bucket.
void ExpectPollsBeforeReplicate(bool replicate_stream_ordered, int want_polls) {
  ShardingPlan plan;
  plan.world_size = 4;
  plan.shard_size = 2;
  plan.replicate_size = 2;
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  for (ScalarType reduce : {kF32, kBF16}) {
    ScriptedGroup shard(true, /*pending=*/3), replicate(true);
    shard.ordered = true;
    replicate.ordered = replicate_stream_ordered;
    replicate.before = &shard;
    ReductionContext context;
    context.plan = &plan;
    context.groups = {&shard, &replicate};
    context.device = &device;
    context.reduce_type = reduce;
    std::vector<float> grad = Gradient(0, 2 * kNumel), reduced(kNumel);
    ASSERT_TRUE(
        ReduceUnitGradient(v1::CommHook(), context, grad.data(), kNumel, reduced.data()).ok());
    EXPECT_EQ(replicate.before_polls_at_all_reduce, want_polls) << ScalarTypeName(reduce);
  }
}

// A replicate all-reduce that waits on the host: the reduce-scatter completes first, under
// its own watchdog (comm_hooks.cc SettleBeforeReplicate): three answers of "in flight",
// then "done", all before the all-reduce.
TEST(HybridReduction, TheReduceScatterCompletesBeforeAHostWaitedAllReduce) {
  ExpectPollsBeforeReplicate(/*replicate_stream_ordered=*/false, 4);
}

// Both stream-ordered (NCCL's): the all-reduce is enqueued behind the reduce-scatter at
// once, so the reduction's launch holds no host wait (the completion poll watches both).
TEST(HybridReduction, AStreamOrderedAllReduceIsEnqueuedWithoutWaiting) {
  ExpectPollsBeforeReplicate(/*replicate_stream_ordered=*/true, 0);
}

}  // namespace
}  // namespace shardwise::fsdp
