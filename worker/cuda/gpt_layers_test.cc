// The GPT's layers on the GPU (CudaDevice: transformer_kernels.h, attention.h) against the
// CPU's implementations of the same formulas (compute/cpu/) run in FP64: embeddings exact
// (the backward equal to the CPU's FP32 loop bit for bit, and the same bits on every run),
// LayerNorm and attention within FP32 rounding with TF32 off, attention with BF16 and FP16
// operands within their rounding; the fused attention kernels within FP32 rounding of the CPU's
// fused loops in FP64, the same bits on every run; cuDNN's, with BF16 and FP16 operands,
// within their rounding; both on q, k and v packed and apart, grouped or not, and both in
// 16-bit storage with the bits of FP32 storage rounded once.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu/attention.h"
#include "worker/compute/cpu/embedding.h"
#include "worker/compute/cpu/fused_attention.h"
#include "worker/compute/cpu/layer_norm.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/cuda_device_fixture.h"
#include "worker/cuda/cudnn_test_support.h"
#include "worker/cuda/gpu_test_support.h"

namespace shardwise::cuda {
namespace {

using ::shardwise::cuda::testing::DeviceVector;
using ::shardwise::cuda::testing::ExpectNear;
using ::shardwise::cuda::testing::ForEachStorage;
using ::shardwise::cuda::testing::RandomFloats;
using ::shardwise::cuda::testing::Stored;

std::vector<double> Wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<float> Narrow(const std::vector<double>& v) { return {v.begin(), v.end()}; }

using GptLayersTest = ::shardwise::cuda::testing::CudaDeviceTest;

// A skewed stream of ids: a few very frequent (long runs once sorted), most rare.
std::vector<int64_t> SkewedIds(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<int64_t> geometric(0.05);
  std::vector<int64_t> ids(n);
  for (auto& id : ids) id = std::min(vocab - 1, geometric(rng));
  return ids;
}

// Widened 16-bit values.
std::vector<float> Widened(ScalarType type, DeviceVector<uint16_t>& values) {
  const std::vector<uint16_t> bits = values.ToHost();
  std::vector<float> wide(bits.size());
  cpu::Widen(type, bits.data(), wide.data(), wide.size());
  return wide;
}

TEST_F(GptLayersTest, EmbeddingForwardCopiesTheRows) {
  const int64_t vocab = 97, dim = 33, n = 1000;
  const auto table = RandomFloats(vocab * dim, 1);
  const auto ids = SkewedIds(n, vocab, 2);
  std::vector<float> want(n * dim);
  cpu::EmbeddingForward(table.data(), ids.data(), n, dim, want.data());
  DeviceVector<float> d_table(table), d_out(n * dim);
  DeviceVector<int64_t> d_ids(ids);
  device_->EmbeddingForward(d_table.get(), d_ids.get(), n, dim, d_out.get());
  EXPECT_EQ(d_out.ToHost(), want);
}

TEST_F(GptLayersTest, EmbeddingBackwardAddsInTheCpusOrderBitForBit) {
  const int64_t vocab = 301, dim = 70;
  for (int64_t n : {1, 255, 4096, 20000}) {
    const auto ids = SkewedIds(n, vocab, static_cast<uint32_t>(n));
    const auto dout = RandomFloats(n * dim, 3);
    const auto table_grad = RandomFloats(vocab * dim, 4);  // accumulates onto what is there
    std::vector<float> want(table_grad);
    cpu::EmbeddingBackward(ids.data(), dout.data(), n, dim, want.data());
    DeviceVector<int64_t> d_ids(ids);
    DeviceVector<float> d_dout(dout);
    for (int run = 0; run < 2; ++run) {
      DeviceVector<float> d_grad(table_grad);
      device_->EmbeddingBackward(d_ids.get(), d_dout.get(), n, dim, d_grad.get());
      EXPECT_EQ(d_grad.ToHost(), want) << "n " << n << ", run " << run;
    }
  }
}

// Rows 16-byte aligned (16, 768) and not (1031); more rows than the grid's warps (one per
// row, grid-stride past 524,288); the same bits on a second run.
TEST_F(GptLayersTest, LayerNormMatchesTheCpuInFp64) {
  const float eps = 1e-5f;
  for (const auto& [rows, dim] :
       {std::pair<int64_t, int64_t>{300, 16}, {300, 768}, {300, 1031}, {600000, 8}}) {
    for (bool affine : {true, false}) {
      auto x = RandomFloats(rows * dim, 5, 2.0f);
      for (int64_t j = 0; j < dim; ++j) x[j] += 100.0f;  // a row far from zero mean
      const auto w = RandomFloats(dim, 6), b = RandomFloats(dim, 7);
      const auto dy = RandomFloats(rows * dim, 8);
      const auto dw0 = RandomFloats(dim, 9), db0 = RandomFloats(dim, 10);

      std::vector<double> y(rows * dim), mean(rows), rstd(rows), dx(rows * dim);
      std::vector<double> dw = Wide(dw0), db = Wide(db0);
      const auto x64 = Wide(x), w64 = Wide(w), b64 = Wide(b), dy64 = Wide(dy);
      cpu::LayerNormForward(x64.data(), affine ? w64.data() : nullptr,
                            affine ? b64.data() : nullptr, rows, dim, static_cast<double>(eps),
                            y.data(), mean.data(), rstd.data());
      cpu::LayerNormBackward(x64.data(), affine ? w64.data() : nullptr, mean.data(), rstd.data(),
                             dy64.data(), rows, dim, dx.data(), affine ? dw.data() : nullptr,
                             affine ? db.data() : nullptr);

      DeviceVector<float> d_x(x), d_w(w), d_b(b), d_dy(dy), d_dw(dw0), d_db(db0);
      DeviceVector<float> d_y(rows * dim), d_mean(rows), d_rstd(rows), d_dx(rows * dim);
      device_->LayerNormForward(d_x.get(), affine ? d_w.get() : nullptr,
                                affine ? d_b.get() : nullptr, rows, dim, eps, d_y.get(),
                                d_mean.get(), d_rstd.get());
      device_->LayerNormBackward(d_x.get(), affine ? d_w.get() : nullptr, d_mean.get(),
                                 d_rstd.get(), d_dy.get(), rows, dim, d_dx.get(),
                                 affine ? d_dw.get() : nullptr, affine ? d_db.get() : nullptr);
      ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
      // The first row sits near 100: its mean, a float sum of up to 1031 values near 100
      // (the GPU's, in float: compute/norm_rows.h), errs by about 1e-5, which moves each y
      // by that times rstd |w| (w up to about 3 here).
      ExpectNear(d_y.ToHost(), Narrow(y), 1e-5f, 1e-4f, "layer norm y");
      ExpectNear(d_mean.ToHost(), Narrow(mean), 1e-6f, 1e-6f, "layer norm mean");
      ExpectNear(d_rstd.ToHost(), Narrow(rstd), 1e-6f, 0, "layer norm rstd");
      ExpectNear(d_dx.ToHost(), Narrow(dx), 1e-4f, 1e-5f, "layer norm dx");
      ExpectNear(d_dw.ToHost(), Narrow(affine ? dw : Wide(dw0)), 1e-5f, 1e-4f, "layer norm dw");
      ExpectNear(d_db.ToHost(), Narrow(affine ? db : Wide(db0)), 1e-5f, 1e-4f, "layer norm db");
      DeviceVector<float> again(rows * dim), again_mean(rows), again_rstd(rows);
      device_->LayerNormForward(d_x.get(), affine ? d_w.get() : nullptr,
                                affine ? d_b.get() : nullptr, rows, dim, eps, again.get(),
                                again_mean.get(), again_rstd.get());
      ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
      EXPECT_EQ(again.ToHost(), d_y.ToHost()) << "the forward's bits changed between runs";
    }
  }
}

std::string Describe(const AttentionShape& c) {
  return ::testing::PrintToString(std::vector<int64_t>{c.batch, c.seq, c.heads, c.head_dim}) +
         " (batch, seq, heads, head_dim)";
}

// Runs attention forward and backward on the GPU with `operands` and in FP64 on the CPU.
void CheckAttention(CudaDevice& device, const AttentionShape& c, ScalarType operands, float rtol,
                    float atol) {
  const int64_t qkv_n = c.batch * c.seq * 3 * c.width(), out_n = c.batch * c.seq * c.width();
  const int64_t probs_n = c.batch * c.heads * c.seq * c.seq;
  auto qkv = RandomFloats(qkv_n, 11), dout = RandomFloats(out_n, 12);
  if (operands != ScalarType::kFloat32) {
    // Mixed precision's operands arrive rounded to their type, as the model keeps them.
    DeviceVector<float> round_qkv(qkv), round_dout(dout);
    device.RoundToPrecision(operands, round_qkv.get(), qkv_n);
    device.RoundToPrecision(operands, round_dout.get(), out_n);
    qkv = round_qkv.ToHost();
    dout = round_dout.ToHost();
  }
  std::vector<double> out(out_n), probs(probs_n), dqkv(qkv_n);
  const auto qkv64 = Wide(qkv), dout64 = Wide(dout);
  cpu::AttentionForward(qkv64.data(), c.batch, c.seq, c.heads, c.head_dim, out.data(),
                        probs.data());
  cpu::AttentionBackward(qkv64.data(), probs.data(), dout64.data(), c.batch, c.seq, c.heads,
                         c.head_dim, dqkv.data());

  DeviceVector<float> d_qkv(qkv), d_dout(dout), d_out(out_n), d_probs(probs_n), d_dqkv(qkv_n);
  device.AttentionForward(d_qkv.get(), c, d_out.get(), d_probs.get(), operands);
  device.AttentionBackward(d_qkv.get(), d_probs.get(), d_dout.get(), c, d_dqkv.get(), operands);
  ASSERT_TRUE(device.Synchronize().ok()) << device.status();
  const auto got_probs = d_probs.ToHost();
  // Above the diagonal the probabilities are exactly zero.
  for (int64_t r = 0; r < c.batch * c.heads * c.seq; ++r) {
    for (int64_t j = r % c.seq + 1; j < c.seq; ++j) ASSERT_EQ(got_probs[r * c.seq + j], 0.0f);
  }
  ExpectNear(got_probs, Narrow(probs), rtol, atol, "attention probs");
  ExpectNear(d_out.ToHost(), Narrow(out), rtol, atol, "attention out");
  ExpectNear(d_dqkv.ToHost(), Narrow(dqkv), rtol, atol, "attention dqkv");
}

// 16-bit storage (Device::StorageType): LayerNorm forward and backward on BF16 rows (and
// its weights, as 16-bit parameters are), and the embedding lookup from a BF16 table, give
// the bits of FP32 storage followed by rounding; mean, rstd and the parameter gradients,
// FP32 in both, are equal, and so is the embedding's FP32 gradient from a BF16 dout.
TEST_F(GptLayersTest, SixteenBitStorageEqualsFp32StorageRounded) {
  constexpr ScalarType kType = ScalarType::kBFloat16;
  const int64_t rows = 70, dim = 771;
  std::vector<float> x = RandomFloats(rows * dim, 81, 3.0f), w = RandomFloats(dim, 82),
                     b = RandomFloats(dim, 83), dy = RandomFloats(rows * dim, 84);
  std::vector<std::vector<uint16_t>> bits;
  for (std::vector<float>* v : {&x, &w, &b, &dy}) {
    cpu::RoundToPrecision(kType, v->data(), v->size());
    bits.emplace_back(v->size());
    cpu::Narrow(kType, v->data(), bits.back().data(), v->size());
  }
  DeviceVector<float> x32(x), w32(w), b32(b), dy32(dy), y32(rows * dim), dx32(rows * dim),
      mean32(rows), rstd32(rows), dw32(dim), db32(dim);
  DeviceVector<uint16_t> x16(bits[0]), w16(bits[1]), b16(bits[2]), dy16(bits[3]), y16(rows * dim),
      dx16(rows * dim);
  DeviceVector<float> mean16(rows), rstd16(rows), dw16(dim), db16(dim);
  // The embedding lookup: the rows of x as a table, gathered by ids.
  const std::vector<int64_t> ids = {5, 0, 69, 5, 31};
  DeviceVector<int64_t> d_ids(ids);
  DeviceVector<float> gathered32(ids.size() * dim);
  DeviceVector<uint16_t> gathered16(ids.size() * dim);
  // The embedding backward: dy's first rows as the gradient of the lookup.
  DeviceVector<float> dtable32(rows * dim), dtable16(rows * dim);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the vectors' zeroing, before the streams
  device_->LayerNormForward(x32.get(), w32.get(), b32.get(), rows, dim, 1e-5f, y32.get(),
                            mean32.get(), rstd32.get());
  device_->LayerNormBackward(x32.get(), w32.get(), mean32.get(), rstd32.get(), dy32.get(), rows,
                             dim, dx32.get(), dw32.get(), db32.get());
  device_->RoundToPrecision(kType, y32.get(), y32.size());
  device_->RoundToPrecision(kType, dx32.get(), dx32.size());
  device_->EmbeddingForward(x32.get(), d_ids.get(), ids.size(), dim, gathered32.get());
  device_->EmbeddingBackward(d_ids.get(), dy32.get(), ids.size(), dim, dtable32.get());
  const ConstTensorRef cx16(x16.get(), kType), cw16(w16.get(), kType);
  device_->LayerNormForward(cx16, cw16, ConstTensorRef(b16.get(), kType), rows, dim, 1e-5f,
                            TensorRef(y16.get(), kType), mean16.get(), rstd16.get());
  device_->LayerNormBackward(cx16, cw16, mean16.get(), rstd16.get(),
                             ConstTensorRef(dy16.get(), kType), rows, dim,
                             TensorRef(dx16.get(), kType), dw16.get(), db16.get());
  device_->EmbeddingForward(cx16, d_ids.get(), ids.size(), dim, TensorRef(gathered16.get(), kType));
  device_->EmbeddingBackward(d_ids.get(), ConstTensorRef(dy16.get(), kType), ids.size(), dim,
                             dtable16.get());
  ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
  for (const auto& [got16, want] :
       {std::pair<DeviceVector<uint16_t>*, DeviceVector<float>*>{&y16, &y32},
        {&dx16, &dx32},
        {&gathered16, &gathered32}}) {
    EXPECT_EQ(Widened(kType, *got16), want->ToHost());
  }
  for (const auto& [got, want] :
       {std::pair<DeviceVector<float>*, DeviceVector<float>*>{&mean16, &mean32},
        {&rstd16, &rstd32},
        {&dw16, &dw32},
        {&db16, &db32},
        {&dtable16, &dtable32}}) {
    EXPECT_EQ(got->ToHost(), want->ToHost());
  }
}

// A pre-norm block's residual sum fused with LayerNorm (AddLayerNormForward, and
// LayerNormBackwardAdd adding the input gradient into the residual's: one kernel each
// where the rows are stored in the compute type) against Device's defaults, the
// operations one by one: the same bits for the sums, the norm's output and statistics,
// the residual's gradient and the parameter gradients.
template <typename E>
void CheckResidualLayerNorm(CudaDevice& device, ScalarType type) {
  const int64_t rows = 70, dim = 771, n = rows * dim;
  const std::vector<E> x = Stored<E>(type, n, 91, 3.0f), residual = Stored<E>(type, n, 92),
                       w = Stored<E>(type, dim, 93), b = Stored<E>(type, dim, 94),
                       dy = Stored<E>(type, n, 95), dresidual = Stored<E>(type, n, 96);
  DeviceVector<E> d_residual(residual), d_w(w), d_b(b), d_dy(dy);
  // Each run's own copies of what the operations write.
  struct Run {
    Run(const std::vector<E>& x0, const std::vector<E>& dresidual0, int64_t rows, int64_t dim)
        : x(x0), y(x0.size()), dresidual(dresidual0), mean(rows), rstd(rows), dw(dim), db(dim) {}
    DeviceVector<E> x, y, dresidual;
    DeviceVector<float> mean, rstd, dw, db;
  };
  Run fused(x, dresidual, rows, dim), one_by_one(x, dresidual, rows, dim);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the vectors' zeroing, before the streams
  const ConstTensorRef cw(d_w.get(), type), cb(d_b.get(), type), cdy(d_dy.get(), type);
  for (Run* run : {&fused, &one_by_one}) {
    const TensorRef rx(run->x.get(), type), ry(run->y.get(), type),
        rdres(run->dresidual.get(), type);
    const ConstTensorRef cres(d_residual.get(), type);
    if (run == &fused) {
      device.AddLayerNormForward(rx, cres, cw, cb, rows, dim, 1e-5f, ry, run->mean.get(),
                                 run->rstd.get(), type);
      device.LayerNormBackwardAdd(rx, cw, run->mean.get(), run->rstd.get(), cdy, rows, dim, rdres,
                                  run->dw.get(), run->db.get(), type);
    } else {
      device.Device::AddLayerNormForward(rx, cres, cw, cb, rows, dim, 1e-5f, ry, run->mean.get(),
                                         run->rstd.get(), type);
      device.Device::LayerNormBackwardAdd(rx, cw, run->mean.get(), run->rstd.get(), cdy, rows, dim,
                                          rdres, run->dw.get(), run->db.get(), type);
    }
  }
  ASSERT_TRUE(device.Synchronize().ok()) << device.status();
  EXPECT_EQ(fused.x.ToHost(), one_by_one.x.ToHost());
  EXPECT_EQ(fused.y.ToHost(), one_by_one.y.ToHost());
  EXPECT_EQ(fused.dresidual.ToHost(), one_by_one.dresidual.ToHost());
  for (const auto& [got, want] : {std::pair{&fused.mean, &one_by_one.mean},
                                  {&fused.rstd, &one_by_one.rstd},
                                  {&fused.dw, &one_by_one.dw},
                                  {&fused.db, &one_by_one.db}}) {
    EXPECT_EQ(got->ToHost(), want->ToHost());
  }
}

TEST_F(GptLayersTest, ResidualLayerNormFusedEqualsTheOperationsOneByOne) {
  ForEachStorage([&](auto element, ScalarType type) {
    CheckResidualLayerNorm<decltype(element)>(*device_, type);
  });
}

TEST_F(GptLayersTest, AttentionMatchesTheCpuInFp64WithTf32Off) {
  for (const AttentionShape& c :
       {AttentionShape{1, 1, 1, 8}, AttentionShape{2, 37, 3, 16}, AttentionShape{3, 128, 4, 64}}) {
    SCOPED_TRACE(Describe(c));
    CheckAttention(*device_, c, ScalarType::kFloat32, 1e-4f, 1e-5f);
  }
}

TEST_F(GptLayersTest, AttentionWithBf16OperandsIsWithinBf16Rounding) {
  // BF16 keeps 8 significant bits: the 16-bit copies of P and dS round by up to 2^-9.
  CheckAttention(*device_, AttentionShape{2, 64, 2, 32}, ScalarType::kBFloat16, 2e-2f, 2e-2f);
}

TEST_F(GptLayersTest, AttentionWithFp16OperandsIsWithinFp16Rounding) {
  // FP16 keeps 11 bits: the 16-bit copies of P and dS round by up to 2^-12; the scores of
  // entries in [-1, 1] stay far inside FP16's range.
  CheckAttention(*device_, AttentionShape{2, 64, 2, 32}, ScalarType::kFloat16, 4e-3f, 4e-3f);
}

// One FUSED attention's operands: q, k and v packed (the GPT's qkv) or apart with
// `kv_heads` K/V heads (the Llama's, grouped where kv_heads < heads), kept in one buffer
// (q, then k, then v, when apart).
struct FusedCase {
  AttentionShape shape;
  int64_t kv_heads;
  bool packed;
  int64_t rows() const { return shape.batch * shape.seq; }
  int64_t kv_numel() const { return rows() * kv_heads * shape.head_dim; }
  int64_t qkv_numel() const {
    return packed ? rows() * 3 * shape.width() : rows() * shape.width() + 2 * kv_numel();
  }
  // The case's q, k and v in the buffer at `base` (a pointer or a typed reference).
  template <typename Ptr>
  QkvSpan<Ptr> Span(Ptr base) const {
    if (packed) return PackedQkvSpan(base, shape);
    const Ptr k = base + rows() * shape.width();
    return SeparateQkvSpan(base, k, k + kv_numel(), shape, kv_heads);
  }
};

FusedCase Packed(const AttentionShape& shape) { return {shape, shape.heads, true}; }
FusedCase Apart(const AttentionShape& shape, int64_t kv_heads) { return {shape, kv_heads, false}; }

std::string Describe(const FusedCase& c) {
  return Describe(c.shape) + (c.packed ? ", packed" : ", apart") + ", " +
         std::to_string(c.kv_heads) + " K/V heads";
}

// One FUSED attention on `device` in `operands` against the CPU's fused loops in FP64 on
// the same operands (random, seeded, rounded to `operands`): the CPU's out, lse and
// gradients of q, k and v and the device's, whose backward ran twice with the same bits.
struct FusedAttentionRun {
  std::vector<double> out, lse, dqkv;             // the CPU's, in FP64
  std::vector<float> got_out, got_lse, got_dqkv;  // the device's
};

void RunFusedAttention(CudaDevice& device, const FusedCase& c, ScalarType operands, uint32_t seed,
                       FusedAttentionRun* run) {
  const AttentionShape& shape = c.shape;
  const int64_t qkv_n = c.qkv_numel(), out_n = c.rows() * shape.width();
  const int64_t stats_n = shape.batch * shape.heads * shape.seq;
  auto qkv = RandomFloats(qkv_n, seed), dout = RandomFloats(out_n, seed + 1);
  cpu::RoundToPrecision(operands, qkv.data(), qkv.size());
  cpu::RoundToPrecision(operands, dout.data(), dout.size());
  run->out.resize(out_n), run->lse.resize(stats_n), run->dqkv.resize(qkv_n);
  std::vector<double> dots(stats_n);
  const auto qkv64 = Wide(qkv), dout64 = Wide(dout);
  cpu::FusedAttentionForward(c.Span(qkv64.data()), shape, run->out.data(), run->lse.data());
  cpu::FusedAttentionBackward(c.Span(qkv64.data()), run->out.data(), run->lse.data(), dout64.data(),
                              shape, dots.data(), c.Span(run->dqkv.data()));

  DeviceVector<float> d_qkv(qkv), d_dout(dout), d_out(out_n), d_lse(stats_n);
  const QkvSpan<const float*> d_span = c.Span<const float*>(d_qkv.get());
  device.FusedAttentionForward(d_span, shape, d_out.get(), d_lse.get(), operands);
  for (int pass = 0; pass < 2; ++pass) {
    DeviceVector<float> d_dqkv(qkv_n);
    device.FusedAttentionBackward(d_span, d_out.get(), d_lse.get(), d_dout.get(), shape,
                                  c.Span(d_dqkv.get()), operands);
    ASSERT_TRUE(device.Synchronize().ok()) << device.status();
    if (pass == 0) {
      run->got_dqkv = d_dqkv.ToHost();
    } else {
      EXPECT_EQ(d_dqkv.ToHost(), run->got_dqkv) << "the backward's bits changed between runs";
    }
  }
  run->got_out = d_out.ToHost();
  run->got_lse = d_lse.ToHost();
}

// The fused kernels (fused_attention.h) in FP32: out, each row's log-sum-exp and the
// gradients within FP32 rounding of the CPU's FP64.
void CheckFusedAttention(CudaDevice& device, const FusedCase& c) {
  FusedAttentionRun run;
  RunFusedAttention(device, c, ScalarType::kFloat32, 13, &run);
  if (::testing::Test::HasFatalFailure()) return;
  ExpectNear(run.got_out, Narrow(run.out), 1e-4f, 1e-5f, "fused attention out");
  ExpectNear(run.got_lse, Narrow(run.lse), 1e-5f, 1e-5f, "fused attention lse");
  ExpectNear(run.got_dqkv, Narrow(run.dqkv), 1e-4f, 1e-5f, "fused attention dqkv");
}

// Head sizes with register rows (32, 64, 128) and without (16, 12); sequences of one
// token, of several key tiles and of several blocks of rows (a block's keys start their
// query loop at its first key); more sequences than a grid's y or z dimension holds; q, k
// and v apart, with and without grouped K/V heads (packed for the kernel, K and V
// repeated, the gradients summed back).
TEST_F(GptLayersTest, FusedAttentionMatchesTheCpuInFp64) {
  for (const FusedCase& c :
       {Packed({1, 1, 1, 64}), Packed({2, 37, 3, 16}), Packed({3, 128, 4, 64}),
        Packed({1, 300, 2, 32}), Packed({2, 97, 2, 128}), Packed({1, 70, 2, 12}),
        Packed({66000, 2, 1, 32}), Apart({2, 37, 4, 16}, 2), Apart({1, 128, 4, 64}, 1),
        Apart({2, 40, 2, 32}, 2)}) {
    SCOPED_TRACE(Describe(c));
    CheckFusedAttention(*device_, c);
  }
}

// A device whose FUSED attention runs on `kernel` (cuDNN, or the CUDA cores), so a GPU or
// cuDNN that cannot run it fails the test rather than passing on the other kernel.
absl::StatusOr<std::unique_ptr<CudaDevice>> DeviceWithAttentionKernel(
    v1::CudaOptions::FusedAttentionKernel kernel) {
  CudaDeviceOptions options;
  options.fused_attention_kernel = kernel;
  return CudaDevice::Create(options);
}

// FUSED attention with 16-bit operands through cuDNN's flash attention (the device made
// with cuda.fused_attention_kernel CUDNN, so a GPU or cuDNN that cannot run it fails here
// rather than passing on the CUDA-core kernel): against the CPU's fused loops in FP64 on
// the same rounded operands, within the operands' rounding (cuDNN rounds the
// probabilities to them before the second product, as FlashAttention does); the
// statistics within FP32 rounding; the backward twice with the same bits (only
// deterministic engines are taken).
void CheckCudnnFusedAttention(const FusedCase& c, ScalarType operands, float tolerance) {
  SKIP_WHERE_CUDNN_REFUSES(
      c.packed ? AttentionLayout::Packed(c.shape) : AttentionLayout::Separate(c.shape, c.kv_heads),
      GraphIo(operands));
  auto made = DeviceWithAttentionKernel(v1::CudaOptions::CUDNN);
  ASSERT_TRUE(made.ok()) << made.status();
  FusedAttentionRun run;
  RunFusedAttention(**made, c, operands, 15, &run);
  if (::testing::Test::HasFatalFailure()) return;
  // The output is widened from the operands' type: every value one of theirs.
  std::vector<float> rounded = run.got_out;
  cpu::RoundToPrecision(operands, rounded.data(), rounded.size());
  EXPECT_EQ(run.got_out, rounded) << "out holds values that are not " << ScalarTypeName(operands);
  ExpectNear(run.got_out, Narrow(run.out), tolerance, tolerance, "cuDNN attention out");
  ExpectNear(run.got_lse, Narrow(run.lse), 1e-4f, 1e-4f, "cuDNN attention lse");
  ExpectNear(run.got_dqkv, Narrow(run.dqkv), tolerance, tolerance, "cuDNN attention dqkv");
}

// GPT-2's head size at a context of 128 and 1000 (not a multiple of 128: cuDNN 9.16 or
// newer), and a head size of 128; the Llama's q, k and v apart, grouped (two query heads
// per K/V head, and all four on one) and not.
TEST(CudnnFusedAttentionTest, MatchesTheCpuInFp64WithinBf16AndFp16Rounding) {
  SKIP_WITHOUT_GPU();
  for (const FusedCase& c :
       {Packed({2, 128, 2, 64}), Packed({1, 1000, 3, 64}), Packed({2, 64, 2, 128}),
        Apart({2, 128, 4, 64}, 2), Apart({1, 200, 4, 64}, 1), Apart({2, 64, 2, 128}, 2)}) {
    SCOPED_TRACE(Describe(c));
    CheckCudnnFusedAttention(c, ScalarType::kBFloat16, 2e-2f);
    CheckCudnnFusedAttention(c, ScalarType::kFloat16, 4e-3f);
  }
}

// 16-bit storage (Device::StorageType) against FP32 storage on the same 16-bit values:
// out and the gradients of 16-bit storage are FP32 storage's rounded once (where FP32
// storage's are already 16-bit values, as cuDNN's are, its own), the log-sum-exps equal.
void ExpectSixteenBitStorageGivesTheBitsOfFp32Storage(CudaDevice& device, const FusedCase& c,
                                                      ScalarType type) {
  const AttentionShape& shape = c.shape;
  const int64_t qkv_n = c.qkv_numel(), out_n = c.rows() * shape.width();
  const int64_t stats_n = shape.batch * shape.heads * shape.seq;
  auto qkv = RandomFloats(qkv_n, 51), dout = RandomFloats(out_n, 52);
  std::vector<uint16_t> qkv_bits(qkv_n), dout_bits(out_n);
  cpu::RoundToPrecision(type, qkv.data(), qkv.size());
  cpu::RoundToPrecision(type, dout.data(), dout.size());
  cpu::Narrow(type, qkv.data(), qkv_bits.data(), qkv.size());
  cpu::Narrow(type, dout.data(), dout_bits.data(), dout.size());
  DeviceVector<float> qkv32(qkv), dout32(dout), out32(out_n), lse32(stats_n), dqkv32(qkv_n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  device.FusedAttentionForward(c.Span<const float*>(qkv32.get()), shape, out32.get(), lse32.get(),
                               type);
  // The model rounds FP32 storage's out before the backward reads it.
  device.RoundToPrecision(type, out32.get(), out_n);
  device.FusedAttentionBackward(c.Span<const float*>(qkv32.get()), out32.get(), lse32.get(),
                                dout32.get(), shape, c.Span(dqkv32.get()), type);
  DeviceVector<uint16_t> qkv16(qkv_bits), dout16(dout_bits), out16(out_n), dqkv16(qkv_n);
  DeviceVector<float> lse16(stats_n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the vectors' zeroing, before the streams
  const QkvSpan<ConstTensorRef> span16 = c.Span(ConstTensorRef(qkv16.get(), type));
  device.FusedAttentionForward(span16, shape, TensorRef(out16.get(), type), lse16.get(), type);
  device.FusedAttentionBackward(span16, ConstTensorRef(out16.get(), type), lse16.get(),
                                ConstTensorRef(dout16.get(), type), shape,
                                c.Span(TensorRef(dqkv16.get(), type)), type);
  ASSERT_TRUE(device.Synchronize().ok()) << device.status();
  std::vector<float> want_out = out32.ToHost(), want_dqkv = dqkv32.ToHost();
  cpu::RoundToPrecision(type, want_dqkv.data(), want_dqkv.size());
  EXPECT_EQ(Widened(type, out16), want_out);
  EXPECT_EQ(lse16.ToHost(), lse32.ToHost());
  EXPECT_EQ(Widened(type, dqkv16), want_dqkv);
}

// cuDNN binds q, k, v, out, dout and the gradients stored in the operands' type as they
// are, without copies.
TEST(CudnnFusedAttentionTest, SixteenBitStorageGivesTheBitsOfFp32Storage) {
  SKIP_WITHOUT_GPU();
  auto made = DeviceWithAttentionKernel(v1::CudaOptions::CUDNN);
  ASSERT_TRUE(made.ok()) << made.status();
  for (const FusedCase& c : {Packed({2, 128, 2, 64}), Apart({2, 128, 4, 64}, 2)}) {
    SCOPED_TRACE(Describe(c));
    ExpectSixteenBitStorageGivesTheBitsOfFp32Storage(**made, c, ScalarType::kBFloat16);
    ExpectSixteenBitStorageGivesTheBitsOfFp32Storage(**made, c, ScalarType::kFloat16);
  }
}

// The CUDA-core kernel reads and writes 16-bit storage itself at head sizes 32, 64 and 128
// (grouped heads: FP32 working space for the gradients, summed and rounded once as they
// are unpacked), and goes through FP32 copies at other sizes.
TEST(CudaCoreFusedAttentionTest, SixteenBitStorageGivesTheBitsOfFp32Storage) {
  SKIP_WITHOUT_GPU();
  auto made = DeviceWithAttentionKernel(v1::CudaOptions::CUDA_CORES);
  ASSERT_TRUE(made.ok()) << made.status();
  for (const FusedCase& c :
       {Packed({2, 70, 2, 64}), Packed({1, 40, 2, 32}), Packed({1, 33, 2, 128}),
        Packed({2, 37, 3, 16}), Apart({2, 50, 4, 64}, 2), Apart({1, 40, 2, 64}, 2),
        Apart({1, 30, 4, 12}, 1)}) {
    SCOPED_TRACE(Describe(c));
    ExpectSixteenBitStorageGivesTheBitsOfFp32Storage(**made, c, ScalarType::kBFloat16);
    ExpectSixteenBitStorageGivesTheBitsOfFp32Storage(**made, c, ScalarType::kFloat16);
  }
}

}  // namespace
}  // namespace shardwise::cuda
