// The fused attention (fused_attention.h) against the materialised softmax
// (attention.h), whose function kernels_test checks against the formula and
// gradient_check_test against finite differences: the same outputs and gradients in
// float64 to rounding, across several key tiles and blocks, partial tiles and one-token
// sequences, with scores large enough that an unshifted exponential would overflow. And
// q, k and v apart with grouped K/V heads against the packed layout with K and V repeated
// (Hugging Face's repeat_kv): the same bits.

#include "worker/compute/cpu/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <utility>
#include <vector>

#include "contracts/memory_estimate.h"
#include "gtest/gtest.h"
#include "proto/job_spec.pb.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu/attention.h"
#include "worker/compute/cpu/llama_layers.h"
#include "worker/compute/cpu/test_values.h"
#include "worker/compute/fused_attention_rows.h"
#include "worker/compute/sixteen_bit_value.h"

namespace shardwise::cpu {
namespace {

template <typename T>
struct Results {
  std::vector<T> out, dqkv;
};

template <typename T>
Results<T> Materialised(const AttentionShape& s, const std::vector<T>& qkv,
                        const std::vector<T>& dout) {
  Results<T> r{std::vector<T>(dout.size()), std::vector<T>(qkv.size())};
  std::vector<T> probs(s.batch * s.heads * s.seq * s.seq);
  AttentionForward(qkv.data(), s.batch, s.seq, s.heads, s.head_dim, r.out.data(), probs.data());
  AttentionBackward(qkv.data(), probs.data(), dout.data(), s.batch, s.seq, s.heads, s.head_dim,
                    r.dqkv.data());
  return r;
}

template <typename T>
Results<T> Fused(const AttentionShape& s, const std::vector<T>& qkv, const std::vector<T>& dout,
                 std::vector<T>* lse) {
  Results<T> r{std::vector<T>(dout.size()), std::vector<T>(qkv.size())};
  lse->assign(s.batch * s.heads * s.seq, T{0});
  std::vector<T> dots(lse->size());
  FusedAttentionForward(PackedQkvSpan(qkv.data(), s), s, r.out.data(), lse->data());
  FusedAttentionBackward(PackedQkvSpan(qkv.data(), s), r.out.data(), lse->data(), dout.data(), s,
                         dots.data(), PackedQkvSpan(r.dqkv.data(), s));
  return r;
}

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<T>& want, double tolerance,
                const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance * std::max(1.0, std::abs(double{want[i]})))
        << what << "[" << i << "]";
  }
}

struct Case {
  AttentionShape shape;
  double magnitude;  // of the q, k, v entries
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "batch " << c.shape.batch << ", seq " << c.shape.seq << ", heads " << c.shape.heads
      << ", head_dim " << c.shape.head_dim << ", entries up to " << c.magnitude;
}

// Runs both in T on random q, k, v with entries up to the case's magnitude; out and dqkv
// within `out_tolerance` and `dqkv_tolerance` (relative, or absolute below 1), every lse finite.
template <typename T>
void ExpectFusedEqualsMaterialised(const Case& c, int seed, double out_tolerance,
                                   double dqkv_tolerance) {
  const AttentionShape s = c.shape;
  const auto qkv = RandomValues<T>(s.batch * s.seq * 3 * s.width(), seed, c.magnitude);
  const auto dout = RandomValues<T>(s.batch * s.seq * s.width(), seed + 1, 1.0);
  std::vector<T> lse;
  const Results<T> fused = Fused(s, qkv, dout, &lse);
  const Results<T> want = Materialised(s, qkv, dout);
  ExpectNear(fused.out, want.out, out_tolerance, "out");
  ExpectNear(fused.dqkv, want.dqkv, dqkv_tolerance, "dqkv");
  for (T value : lse) ASSERT_TRUE(std::isfinite(value));
}

class FusedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedAttentionTest, EqualsTheMaterialisedSoftmaxInFloat64) {
  ExpectFusedEqualsMaterialised<double>(GetParam(), 1, 1e-12, 1e-11);
}

TEST_P(FusedAttentionTest, EqualsTheMaterialisedSoftmaxInFloat32ToRounding) {
  // Relative to the entries' scale: large-magnitude cases put scores in the hundreds,
  // where one rounding of a score moves a probability by ~1e-5.
  const double magnitude = GetParam().magnitude;
  const double tolerance = 2e-5 * std::max(1.0, magnitude * magnitude);
  ExpectFusedEqualsMaterialised<float>(GetParam(), 3, tolerance, tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedAttentionTest,
    ::testing::Values(
        // Several key tiles and a partial last one.
        Case{{2, 2 * fused_attention::kKeyTile + 5, 2, 3}, 1.0},
        // One token: the softmax of one score is 1.
        Case{{3, 1, 2, 4}, 1.0},
        // Exactly one tile, one head.
        Case{{1, fused_attention::kKeyTile, 1, 8}, 1.0},
        // Scores of several hundred: e^s overflows unless shifted by the running max.
        Case{{1, int64_t{3} * fused_attention::kKeyTile, 2, 4}, 12.0},
        // Several of the CPU's tiles, a partial last one, large scores across tiles.
        Case{{2, 2 * kFusedAttentionTile + 7, 2, 5}, 1.0},
        Case{{1, 3 * kFusedAttentionTile, 1, 4}, 12.0},
        // Past one of the CPU's blocks: two key blocks per late query tile (the online
        // softmax across them), two query blocks per early key tile, large scores.
        Case{{1, kFusedAttentionBlock + kFusedAttentionTile + 3, 2, 4}, 12.0},
        Case{{2, 2 * kFusedAttentionBlock + 1, 1, 3}, 1.0}));

// The Llama's grouped-query attention read in place (q, k and v apart, kv_heads K/V heads)
// against K and V repeated into the packed layout, run packed, and the gradients summed
// back over each group (PackGroupedQkv, UnpackGroupedQkvGrad): the same bits, in T.
template <typename T>
void ExpectApartEqualsPacked(const AttentionShape& s, int64_t kv_heads) {
  const int64_t rows = s.batch * s.seq, kv_n = rows * kv_heads * s.head_dim;
  const auto q = RandomValues<T>(rows * s.width(), 21, 1.0);
  const auto k = RandomValues<T>(kv_n, 22, 1.0), v = RandomValues<T>(kv_n, 23, 1.0);
  const auto dout = RandomValues<T>(rows * s.width(), 24, 1.0);
  std::vector<T> qkv(rows * 3 * s.width());
  PackGroupedQkv(q.data(), k.data(), v.data(), rows, s.heads, kv_heads, s.head_dim, qkv.data());
  std::vector<T> lse;
  const Results<T> packed = Fused(s, qkv, dout, &lse);
  std::vector<T> want_dq(q.size()), want_dk(kv_n), want_dv(kv_n);
  UnpackGroupedQkvGrad(packed.dqkv.data(), rows, s.heads, kv_heads, s.head_dim, want_dq.data(),
                       want_dk.data(), want_dv.data());

  const QkvSpan<const T*> apart = SeparateQkvSpan(q.data(), k.data(), v.data(), s, kv_heads);
  std::vector<T> out(dout.size()), apart_lse(lse.size()), dots(lse.size());
  std::vector<T> dq(q.size()), dk(kv_n), dv(kv_n);
  FusedAttentionForward(apart, s, out.data(), apart_lse.data());
  FusedAttentionBackward(apart, out.data(), apart_lse.data(), dout.data(), s, dots.data(),
                         SeparateQkvSpan(dq.data(), dk.data(), dv.data(), s, kv_heads));
  EXPECT_EQ(out, packed.out);
  EXPECT_EQ(apart_lse, lse);
  EXPECT_EQ(dq, want_dq);
  EXPECT_EQ(dk, want_dk);
  EXPECT_EQ(dv, want_dv);
}

TEST(FusedAttention, GroupedQueryAttentionApartEqualsRepeatedKvPacked) {
  // Groups of 2 and 4 query heads, one K/V head per query head (the layout apart, not
  // grouped), past a CPU tile with a partial last one.
  for (const auto& [shape, kv_heads] : {std::pair<AttentionShape, int64_t>{{2, 37, 4, 8}, 2},
                                        {{1, kFusedAttentionTile + 9, 4, 16}, 1},
                                        {{2, 19, 3, 5}, 3}}) {
    SCOPED_TRACE(::testing::Message()
                 << "heads " << shape.heads << ", kv_heads " << kv_heads << ", seq " << shape.seq);
    ExpectApartEqualsPacked<float>(shape, kv_heads);
    ExpectApartEqualsPacked<double>(shape, kv_heads);
  }
}

TEST(FusedAttention, KeepsEachRowsLogSumExp) {
  const AttentionShape s{1, 20, 1, 2};
  const auto qkv = RandomValues<double>(s.seq * 3 * s.width(), 5, 1.0);
  std::vector<double> out(s.seq * s.width()), lse(s.seq);
  FusedAttentionForward(PackedQkvSpan(qkv.data(), s), s, out.data(), lse.data());
  const fused_attention::HeadLayout at{s, 0, 0};
  for (int64_t i = 0; i < s.seq; ++i) {
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      double score = 0;
      for (int64_t d = 0; d < s.head_dim; ++d) {
        score +=
            qkv[at.qkv(i, fused_attention::kQuery) + d] * qkv[at.qkv(j, fused_attention::kKey) + d];
      }
      sum += std::exp(score / std::sqrt(2.0));
    }
    EXPECT_NEAR(lse[i], std::log(sum), 1e-12) << "row " << i;
  }
}

// The memory estimate (contracts/memory_estimate.h) counts at least the scratch a thread
// keeps for the fused attention, and at most the transposes' padding more (it takes each
// transposed row as T + 32 floats): contexts below, at and past a block, head sizes small
// and large.
TEST(FusedAttention, TheMemoryEstimateCountsItsScratch) {
  for (const auto& [seq, head_dim] :
       {std::pair<int64_t, int64_t>{1, 4}, {100, 8}, {128, 64}, {1024, 64}, {2048, 128}}) {
    v1::JobSpec spec;
    v1::GptConfig* gpt = spec.mutable_model()->mutable_gpt();
    gpt->set_block_size(seq);
    gpt->set_n_head(2);
    gpt->set_n_embd(2 * head_dim);
    gpt->set_attention(v1::GptConfig::FUSED);
    const int64_t scratch = 4 * FusedAttentionScratchFloats(seq, head_dim);
    const int64_t estimated = KernelScratchBytes(spec);
    EXPECT_GE(estimated, scratch) << "context " << seq << ", head size " << head_dim;
    // Three transposes, each of head_dim rows at most 16 floats longer than the kernel's.
    EXPECT_LE(estimated - scratch, int64_t{4} * 3 * head_dim * 16)
        << "context " << seq << ", head size " << head_dim;
  }
}

// The key rows' loop of compute/fused_attention_rows.h (the GPU's) may start early (a GPU
// warp starts its threads together): the masked queries before the key add nothing. And
// the rows, started at the key, give the CPU's tiles' gradients to rounding.
TEST(FusedAttention, KeyGradientsDoNotDependOnWhereTheQueryLoopStarts) {
  const AttentionShape s{1, int64_t{2} * fused_attention::kKeyTile, 2, 3};
  const auto qkv = RandomValues<double>(s.seq * 3 * s.width(), 6, 1.0);
  const auto dout = RandomValues<double>(s.seq * s.width(), 7, 1.0);
  std::vector<double> lse;
  const Results<double> fused = Fused(s, qkv, dout, &lse);
  std::vector<double> dots(s.heads * s.seq), unused(qkv.size());
  for (int64_t h = 0; h < s.heads; ++h) {
    const fused_attention::HeadLayout at{s, 0, h};
    for (int64_t i = 0; i < s.seq; ++i) {
      fused_attention::QueryGradientInMemory(at, qkv.data(), fused.out.data(), lse.data(),
                                             dout.data(), i, dots.data(), unused.data());
    }
    for (int64_t j = 0; j < s.seq; ++j) {
      std::vector<double> early(qkv.size()), at_key(qkv.size());
      fused_attention::KeyValueGradientInMemory(at, qkv.data(), dout.data(), lse.data(),
                                                dots.data(), j, /*first_query=*/0, early.data());
      fused_attention::KeyValueGradientInMemory(at, qkv.data(), dout.data(), lse.data(),
                                                dots.data(), j, /*first_query=*/j, at_key.data());
      for (auto part : {fused_attention::kKey, fused_attention::kValue}) {
        for (int64_t d = 0; d < s.head_dim; ++d) {
          const int64_t index = at.qkv(j, part) + d;
          EXPECT_EQ(early[index], at_key[index]) << "head " << h << " key " << j;
          EXPECT_NEAR(at_key[index], fused.dqkv[index], 1e-12) << "head " << h << " key " << j;
        }
      }
    }
  }
}

// The rows over 16-bit storage (the GPU's CUDA-core kernel in a BF16 or FP16 job's
// storage) compute in float what they compute over the values' FP32 widening, bit for
// bit: out, each row's log-sum-exp and D_i, and the gradients, before the kernel rounds
// its outputs once as it stores them. Rows in memory, as the GPU's shared and register
// rows hold the widened q, k, v and dout.
template <ScalarType kType>
void ExpectSixteenBitRowsEqualFp32Rows() {
  const AttentionShape s{2, 2 * fused_attention::kKeyTile + 3, 2, 8};
  auto qkv = RandomValues<float>(s.batch * s.seq * 3 * s.width(), 8, 2.0);
  auto dout = RandomValues<float>(s.batch * s.seq * s.width(), 9, 1.0);
  RoundToPrecision(kType, qkv.data(), qkv.size());
  RoundToPrecision(kType, dout.data(), dout.size());
  const int64_t stats = s.batch * s.heads * s.seq;
  std::vector<float> out(dout.size()), lse(stats), dots(stats), dqkv(qkv.size());
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const fused_attention::HeadLayout at{s, b, h};
      for (int64_t i = 0; i < s.seq; ++i) {
        fused_attention::ForwardInMemory(at, qkv.data(), i, out.data(), lse.data());
      }
    }
  }
  const std::vector<float> exact_out = out;
  RoundToPrecision(kType, out.data(), out.size());  // as the forward stores it
  const auto qkv16 = testing::StoredSixteenBit<kType>(qkv),
             out16 = testing::StoredSixteenBit<kType>(out),
             dout16 = testing::StoredSixteenBit<kType>(dout);
  const int64_t n = s.head_dim;
  std::vector<float> got(n), got_dk(n);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const fused_attention::HeadLayout at{s, b, h};
      for (int64_t i = 0; i < s.seq; ++i) {
        fused_attention::QueryGradientInMemory(at, qkv.data(), out.data(), lse.data(), dout.data(),
                                               i, dots.data(), dqkv.data());
      }
      for (int64_t i = 0; i < s.seq; ++i) {
        SCOPED_TRACE(::testing::Message() << "sequence " << b << ", head " << h << ", row " << i);
        const fused_attention::MemoryRow<const float> q{
            qkv.data() + at.qkv(i, fused_attention::kQuery), n},
            dout_i{dout.data() + at.row(i), n}, k{qkv.data() + at.qkv(i, fused_attention::kKey), n},
            v{qkv.data() + at.qkv(i, fused_attention::kValue), n};
        fused_attention::MemoryRow<float> acc{got.data(), n}, dk{got_dk.data(), n};
        const float row_lse = fused_attention::ForwardRow(at, qkv16.data(), i, q, acc);
        EXPECT_EQ(row_lse, lse[at.stat(i)]);
        EXPECT_TRUE(std::equal(got.begin(), got.end(), exact_out.begin() + at.row(i))) << "out";
        std::vector<float> got_dots(stats);
        fused_attention::QueryGradientRow(at, qkv16.data(), out16.data(), lse.data(), i, q, dout_i,
                                          acc, got_dots.data());
        EXPECT_EQ(got_dots[at.stat(i)], dots[at.stat(i)]);
        EXPECT_TRUE(
            std::equal(got.begin(), got.end(), dqkv.begin() + at.qkv(i, fused_attention::kQuery)))
            << "dq";
        std::vector<float> want(qkv.size());
        fused_attention::KeyValueGradientInMemory(at, qkv.data(), dout.data(), lse.data(),
                                                  dots.data(), i, 0, want.data());
        fused_attention::KeyValueGradientRow(at, qkv16.data(), dout16.data(), lse.data(),
                                             dots.data(), i, 0, k, v, dk, acc);
        EXPECT_TRUE(std::equal(got_dk.begin(), got_dk.end(),
                               want.begin() + at.qkv(i, fused_attention::kKey)))
            << "dk";
        EXPECT_TRUE(
            std::equal(got.begin(), got.end(), want.begin() + at.qkv(i, fused_attention::kValue)))
            << "dv";
      }
    }
  }
}

TEST(FusedAttentionRows, SixteenBitStorageComputesWhatItsFp32WideningComputes) {
  ExpectSixteenBitRowsEqualFp32Rows<ScalarType::kBFloat16>();
  ExpectSixteenBitRowsEqualFp32Rows<ScalarType::kFloat16>();
}

// The GPU kernels' row blocks (fused_attention::RowBlockAt) cover every query row of every
// head of every sequence once, with more sequences than a grid's y or z dimension holds
// (65,535) and partial last blocks.
TEST(FusedAttentionRowBlocks, CoverEveryRowOnce) {
  for (const auto& [shape, rows_per_block] :
       {std::pair{AttentionShape{70000, 3, 1, 32}, int64_t{64}},
        std::pair{AttentionShape{2, 130, 3, 64}, int64_t{64}},
        std::pair{AttentionShape{3, 32, 70000, 16}, int64_t{32}}}) {
    std::vector<int> seen(shape.batch * shape.heads * shape.seq, 0);
    const int64_t blocks = fused_attention::RowBlockCount(shape, rows_per_block);
    for (int64_t index = 0; index < blocks; ++index) {
      const fused_attention::RowBlock block =
          fused_attention::RowBlockAt(shape, rows_per_block, index);
      ASSERT_LT(block.b, shape.batch);
      ASSERT_LT(block.h, shape.heads);
      const fused_attention::HeadLayout at{shape, block.b, block.h};
      const int64_t end = std::min(block.first_row + rows_per_block, shape.seq);
      for (int64_t row = block.first_row; row < end; ++row) ++seen[at.stat(row)];
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<int64_t>(seen.size()))
        << "batch " << shape.batch << ", seq " << shape.seq << ", heads " << shape.heads;
  }
}

}  // namespace
}  // namespace shardwise::cpu
