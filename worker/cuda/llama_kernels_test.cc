// The Llama's layers on the GPU (CudaDevice: llama_kernels.h, and SILU in kernels.h)
// against the CPU's loops (compute/cpu/llama_layers.h) instantiated in FP64, and SiLU's
// FP64 formula (compute/pointwise.h): within FP32 rounding; the copies and the grouped K/V
// gradients' sums against the CPU's FP32 loops, which add in the same order, exactly; and
// the same bits on every run.

#include <cmath>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu/llama_layers.h"
#include "worker/compute/pointwise.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/cuda_device_fixture.h"
#include "worker/cuda/gpu_test_support.h"

namespace shardwise::cuda {
namespace {

using ::shardwise::cuda::testing::DeviceVector;
using ::shardwise::cuda::testing::ExpectNear;
using ::shardwise::cuda::testing::ForEachStorage;
using ::shardwise::cuda::testing::RandomFloats;
using ::shardwise::cuda::testing::Stored;
using ::shardwise::cuda::testing::Widened;

using LlamaKernelsTest = ::shardwise::cuda::testing::CudaDeviceTest;

std::vector<double> Wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<float> Narrow(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// The grouped-query shapes: more query heads than K/V heads (2 and 4 per group), one K/V
// head per query head, and one K/V head for all.
struct HeadShape {
  int64_t heads, kv_heads, head_dim, rows, seq;
};
constexpr HeadShape kHeadShapes[] = {
    {4, 2, 8, 12, 6},
    {8, 2, 16, 10, 5},
    {4, 4, 8, 12, 6},
    {6, 1, 4, 7, 7},
};

TEST_F(LlamaKernelsTest, RmsNormMatchesTheCpu) {
  const float eps = 1e-6f;
  // 300 rows: five chunks of the weight gradient's sum, the last of 44; 64: one whole
  // chunk; 1: one partial chunk.
  for (const auto& [rows, dim] :
       {std::pair<int64_t, int64_t>{300, 8}, {300, 64}, {300, 1031}, {64, 64}, {1, 1031}}) {
    auto x = RandomFloats(rows * dim, 21, 2.0f);
    for (int64_t j = 0; j < dim; ++j) x[j] += 50.0f;  // a row far from zero
    const auto w = RandomFloats(dim, 22), dy = RandomFloats(rows * dim, 23);
    const auto dw0 = RandomFloats(dim, 24);

    std::vector<double> y(rows * dim), rstd(rows), dx(rows * dim), dw = Wide(dw0);
    const auto x64 = Wide(x), w64 = Wide(w), dy64 = Wide(dy);
    cpu::RmsNormForward(x64.data(), w64.data(), rows, dim, double{eps}, y.data(), rstd.data());
    cpu::RmsNormBackward(x64.data(), w64.data(), rstd.data(), dy64.data(), rows, dim, dx.data(),
                         dw.data());

    DeviceVector<float> d_x(x), d_w(w), d_dy(dy), d_dw(dw0);
    DeviceVector<float> d_y(rows * dim), d_rstd(rows), d_dx(rows * dim);
    device_->RmsNormForward(d_x.get(), d_w.get(), rows, dim, eps, d_y.get(), d_rstd.get());
    device_->RmsNormBackward(d_x.get(), d_w.get(), d_rstd.get(), d_dy.get(), rows, dim, d_dx.get(),
                             d_dw.get());
    ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
    ExpectNear(d_rstd.ToHost(), Narrow(rstd), 1e-6f, 0, "rms norm rstd");
    ExpectNear(d_y.ToHost(), Narrow(y), 1e-5f, 1e-6f, "rms norm y");
    ExpectNear(d_dx.ToHost(), Narrow(dx), 1e-5f, 1e-6f, "rms norm dx");
    // FP32 sums over 300 rows against FP64's.
    ExpectNear(d_dw.ToHost(), Narrow(dw), 1e-4f, 1e-5f, "rms norm dw");
    // And the CPU's FP32 sums bit for bit, from the same rstd: both sum the rows in the
    // chunks llama_rows.h fixes.
    std::vector<float> cpu_dx(rows * dim), cpu_dw = dw0;
    const std::vector<float> gpu_rstd = d_rstd.ToHost();
    cpu::RmsNormBackward(x.data(), w.data(), gpu_rstd.data(), dy.data(), rows, dim, cpu_dx.data(),
                         cpu_dw.data());
    EXPECT_EQ(d_dw.ToHost(), cpu_dw);

    // The same bits on every run.
    DeviceVector<float> again_dx(rows * dim), again_dw(dw0);
    device_->RmsNormBackward(d_x.get(), d_w.get(), d_rstd.get(), d_dy.get(), rows, dim,
                             again_dx.get(), again_dw.get());
    ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
    EXPECT_EQ(again_dx.ToHost(), d_dx.ToHost());
    EXPECT_EQ(again_dw.ToHost(), d_dw.ToHost());
  }
}

// 16-bit storage (Device::StorageType): x, w, dy and the outputs in BF16 give the bits of
// FP32 storage followed by rounding (the same float arithmetic on the same values, each
// output rounded once as stored); rstd and dw, FP32 in both, are equal too.
TEST_F(LlamaKernelsTest, RmsNormInSixteenBitStorageEqualsFp32StorageRounded) {
  constexpr ScalarType kType = ScalarType::kBFloat16;
  const int64_t rows = 70, dim = 1031;
  std::vector<float> x = RandomFloats(rows * dim, 31, 2.0f), w = RandomFloats(dim, 32),
                     dy = RandomFloats(rows * dim, 33);
  std::vector<std::vector<uint16_t>> bits;
  for (std::vector<float>* v : {&x, &w, &dy}) {
    cpu::RoundToPrecision(kType, v->data(), v->size());
    bits.emplace_back(v->size());
    cpu::Narrow(kType, v->data(), bits.back().data(), v->size());
  }
  DeviceVector<float> x32(x), w32(w), dy32(dy), y32(rows * dim), dx32(rows * dim), rstd32(rows),
      dw32(dim);
  DeviceVector<uint16_t> x16(bits[0]), w16(bits[1]), dy16(bits[2]), y16(rows * dim),
      dx16(rows * dim);
  DeviceVector<float> rstd16(rows), dw16(dim);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the vectors' zeroing, before the streams
  device_->RmsNormForward(x32.get(), w32.get(), rows, dim, 1e-5f, y32.get(), rstd32.get());
  device_->RmsNormBackward(x32.get(), w32.get(), rstd32.get(), dy32.get(), rows, dim, dx32.get(),
                           dw32.get());
  device_->RoundToPrecision(kType, y32.get(), y32.size());
  device_->RoundToPrecision(kType, dx32.get(), dx32.size());
  const ConstTensorRef cx16(x16.get(), kType), cw16(w16.get(), kType);
  device_->RmsNormForward(cx16, cw16, rows, dim, 1e-5f, TensorRef(y16.get(), kType), rstd16.get());
  device_->RmsNormBackward(cx16, cw16, rstd16.get(), ConstTensorRef(dy16.get(), kType), rows, dim,
                           TensorRef(dx16.get(), kType), dw16.get());
  ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
  for (const auto& [got16, want] :
       {std::pair<DeviceVector<uint16_t>*, DeviceVector<float>*>{&y16, &y32}, {&dx16, &dx32}}) {
    const std::vector<uint16_t> got_bits = got16->ToHost();
    std::vector<float> got(got_bits.size());
    cpu::Widen(kType, got_bits.data(), got.data(), got.size());
    EXPECT_EQ(got, want->ToHost());
  }
  EXPECT_EQ(rstd16.ToHost(), rstd32.ToHost());
  EXPECT_EQ(dw16.ToHost(), dw32.ToHost());
}

// A pre-norm block's residual sum fused with RMSNorm (AddRmsNormForward, and
// RmsNormBackwardAdd adding the input gradient into the residual's: one kernel each where
// the rows are stored in the compute type) against Device's defaults, the operations one
// by one: the same bits.
template <typename E>
void CheckResidualRmsNorm(CudaDevice& device, ScalarType type) {
  const int64_t rows = 70, dim = 1031, n = rows * dim;
  const std::vector<E> x = Stored<E>(type, n, 41, 2.0f), residual = Stored<E>(type, n, 42),
                       w = Stored<E>(type, dim, 43), dy = Stored<E>(type, n, 44),
                       dresidual = Stored<E>(type, n, 45);
  DeviceVector<E> d_residual(residual), d_w(w), d_dy(dy);
  // Each run's own copies of what the operations write.
  struct Run {
    Run(const std::vector<E>& x0, const std::vector<E>& dresidual0, int64_t rows, int64_t dim)
        : x(x0), y(x0.size()), dresidual(dresidual0), rstd(rows), dw(dim) {}
    DeviceVector<E> x, y, dresidual;
    DeviceVector<float> rstd, dw;
  };
  Run fused(x, dresidual, rows, dim), one_by_one(x, dresidual, rows, dim);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the vectors' zeroing, before the streams
  const ConstTensorRef cw(d_w.get(), type), cdy(d_dy.get(), type), cres(d_residual.get(), type);
  for (Run* run : {&fused, &one_by_one}) {
    const TensorRef rx(run->x.get(), type), ry(run->y.get(), type),
        rdres(run->dresidual.get(), type);
    if (run == &fused) {
      device.AddRmsNormForward(rx, cres, cw, rows, dim, 1e-5f, ry, run->rstd.get(), type);
      device.RmsNormBackwardAdd(rx, cw, run->rstd.get(), cdy, rows, dim, rdres, run->dw.get(),
                                type);
    } else {
      device.Device::AddRmsNormForward(rx, cres, cw, rows, dim, 1e-5f, ry, run->rstd.get(), type);
      device.Device::RmsNormBackwardAdd(rx, cw, run->rstd.get(), cdy, rows, dim, rdres,
                                        run->dw.get(), type);
    }
  }
  ASSERT_TRUE(device.Synchronize().ok()) << device.status();
  EXPECT_EQ(fused.x.ToHost(), one_by_one.x.ToHost());
  EXPECT_EQ(fused.y.ToHost(), one_by_one.y.ToHost());
  EXPECT_EQ(fused.dresidual.ToHost(), one_by_one.dresidual.ToHost());
  EXPECT_EQ(fused.rstd.ToHost(), one_by_one.rstd.ToHost());
  EXPECT_EQ(fused.dw.ToHost(), one_by_one.dw.ToHost());
}

TEST_F(LlamaKernelsTest, ResidualRmsNormFusedEqualsTheOperationsOneByOne) {
  ForEachStorage([&](auto element, ScalarType type) {
    CheckResidualRmsNorm<decltype(element)>(*device_, type);
  });
}

// Real rotary tables: angle pos * 10000^(-2i / head_dim).
void RotaryTables(int64_t seq, int64_t head_dim, std::vector<float>* cos, std::vector<float>* sin) {
  const int64_t half = head_dim / 2;
  cos->resize(seq * half);
  sin->resize(seq * half);
  for (int64_t p = 0; p < seq; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / static_cast<double>(head_dim));
      (*cos)[p * half + i] = static_cast<float>(std::cos(angle));
      (*sin)[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

TEST_F(LlamaKernelsTest, RotaryMatchesTheCpuAndItsInverseRotatesBack) {
  for (const HeadShape& s : kHeadShapes) {
    const int64_t n = s.rows * s.heads * s.head_dim;
    const auto x = RandomFloats(n, 31);
    std::vector<float> cos, sin;
    RotaryTables(s.seq, s.head_dim, &cos, &sin);

    const auto cos64 = Wide(cos), sin64 = Wide(sin);
    std::vector<double> forward = Wide(x);
    cpu::Rotary(forward.data(), cos64.data(), sin64.data(), s.rows, s.seq, s.heads, s.head_dim,
                /*inverse=*/false);
    // The inverse of the device's own forward output, as the device computes it next.
    std::vector<double> backward;

    DeviceVector<float> d_x(x), d_cos(cos), d_sin(sin);
    device_->Rotary(d_x.get(), d_cos.get(), d_sin.get(), s.rows, s.seq, s.heads, s.head_dim,
                    /*inverse=*/false);
    ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
    const std::vector<float> rotated = d_x.ToHost();
    ExpectNear(rotated, Narrow(forward), 1e-5f, 1e-6f, "rotary");
    backward = Wide(rotated);
    cpu::Rotary(backward.data(), cos64.data(), sin64.data(), s.rows, s.seq, s.heads, s.head_dim,
                /*inverse=*/true);
    device_->Rotary(d_x.get(), d_cos.get(), d_sin.get(), s.rows, s.seq, s.heads, s.head_dim,
                    /*inverse=*/true);
    ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
    ExpectNear(d_x.ToHost(), Narrow(backward), 1e-5f, 1e-6f, "rotary inverse");
    ExpectNear(d_x.ToHost(), x, 1e-5f, 1e-6f, "rotary round trip");
  }
}

// The rotary embeddings in 16-bit storage: each pair widened, rotated in float and stored
// rounded, the bits of FP32 storage followed by rounding, forward and back.
TEST_F(LlamaKernelsTest, RotaryInSixteenBitStorageEqualsFp32StorageRounded) {
  constexpr ScalarType kType = ScalarType::kBFloat16;
  const int64_t rows = 24, seq = 6, heads = 4, head_dim = 16, n = rows * heads * head_dim;
  std::vector<float> x = RandomFloats(n, 91, 2.0f), cos, sin;
  cpu::RoundToPrecision(kType, x.data(), x.size());
  std::vector<uint16_t> bits(n);
  cpu::Narrow(kType, x.data(), bits.data(), n);
  RotaryTables(seq, head_dim, &cos, &sin);
  DeviceVector<float> x32(x), d_cos(cos), d_sin(sin);
  DeviceVector<uint16_t> x16(bits);
  for (bool inverse : {false, true}) {
    device_->Rotary(x32.get(), d_cos.get(), d_sin.get(), rows, seq, heads, head_dim, inverse);
    device_->RoundToPrecision(kType, x32.get(), n);
    device_->Rotary(TensorRef(x16.get(), kType), d_cos.get(), d_sin.get(), rows, seq, heads,
                    head_dim, inverse);
    ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
    const std::vector<uint16_t> got_bits = x16.ToHost();
    std::vector<float> got(n);
    cpu::Widen(kType, got_bits.data(), got.data(), n);
    EXPECT_EQ(got, x32.ToHost()) << (inverse ? "inverse" : "forward");
  }
}

// The CPU's dq, dk and dv from `dqkv`, each rounded once to `type` as its storage keeps it.
void ExpectedUnpacking(const HeadShape& s, ScalarType type, const std::vector<float>& dqkv,
                       std::vector<float>* dq, std::vector<float>* dk, std::vector<float>* dv) {
  dq->resize(s.rows * s.heads * s.head_dim);
  dk->resize(s.rows * s.kv_heads * s.head_dim);
  dv->resize(dk->size());
  cpu::UnpackGroupedQkvGrad(dqkv.data(), s.rows, s.heads, s.kv_heads, s.head_dim, dq->data(),
                            dk->data(), dv->data());
  for (std::vector<float>* grad : {dq, dk, dv}) {
    cpu::RoundToPrecision(type, grad->data(), grad->size());
  }
}

// In each storage, the packing copies and the unpacking sums in float as the CPU does,
// rounding each sum once: from gradients in the storage type (the materialised
// attention's) and from FP32 working space (the CUDA-core attention's).
TEST_F(LlamaKernelsTest, GroupedQkvPackingMatchesTheCpu) {
  ForEachStorage([&](auto element, ScalarType type) {
    using E = decltype(element);
    for (const HeadShape& s : kHeadShapes) {
      const int64_t width = s.heads * s.head_dim, kv_width = s.kv_heads * s.head_dim;
      const auto q = Stored<E>(type, s.rows * width, 41);
      const auto k = Stored<E>(type, s.rows * kv_width, 42);
      const auto v = Stored<E>(type, s.rows * kv_width, 43);
      std::vector<float> qkv(s.rows * 3 * width);
      cpu::PackGroupedQkv(Widened(type, q).data(), Widened(type, k).data(), Widened(type, v).data(),
                          s.rows, s.heads, s.kv_heads, s.head_dim, qkv.data());
      DeviceVector<E> d_q(q), d_k(k), d_v(v), d_qkv(qkv.size());
      device_->PackGroupedQkv(ConstTensorRef(d_q.get(), type), ConstTensorRef(d_k.get(), type),
                              ConstTensorRef(d_v.get(), type), s.rows, s.heads, s.kv_heads,
                              s.head_dim, TensorRef(d_qkv.get(), type));
      ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
      EXPECT_EQ(Widened(type, d_qkv.ToHost()), qkv) << "packing";

      const auto stored_grad = Stored<E>(type, qkv.size(), 44);
      const std::vector<float> fp32_grad = RandomFloats(qkv.size(), 47);
      DeviceVector<E> d_stored_grad(stored_grad);
      DeviceVector<float> d_fp32_grad(fp32_grad);
      for (const auto& [name, grad, wide_grad] :
           {std::tuple<const char*, ConstTensorRef, std::vector<float>>{
                "from stored gradients", ConstTensorRef(d_stored_grad.get(), type),
                Widened(type, stored_grad)},
            {"from FP32 gradients", d_fp32_grad.get(), fp32_grad}}) {
        SCOPED_TRACE(name);
        std::vector<float> dq, dk, dv;
        ExpectedUnpacking(s, type, wide_grad, &dq, &dk, &dv);
        // dk, dv start as garbage: the unpacking writes them, it does not add to them.
        DeviceVector<E> d_dq(dq.size()), d_dk(Stored<E>(type, dk.size(), 45)),
            d_dv(Stored<E>(type, dv.size(), 46));
        device_->UnpackGroupedQkvGrad(grad, s.rows, s.heads, s.kv_heads, s.head_dim,
                                      TensorRef(d_dq.get(), type), TensorRef(d_dk.get(), type),
                                      TensorRef(d_dv.get(), type));
        ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
        EXPECT_EQ(Widened(type, d_dq.ToHost()), dq);
        EXPECT_EQ(Widened(type, d_dk.ToHost()), dk);
        EXPECT_EQ(Widened(type, d_dv.ToHost()), dv);
      }
    }
  });
}

TEST_F(LlamaKernelsTest, MultiplyElementwiseMatchesTheCpu) {
  const auto a = RandomFloats(10007, 51), b = RandomFloats(a.size(), 52);
  std::vector<float> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] * b[i];
  DeviceVector<float> d_a(a), d_b(b), d_out(a.size());
  device_->MultiplyElementwise(d_a.get(), d_b.get(), a.size(), d_out.get());
  ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
  EXPECT_EQ(d_out.ToHost(), want);
}

TEST_F(LlamaKernelsTest, SiluMatchesTheCpu) {
  const std::vector<float> x = RandomFloats(50001, 61, 4.0f);
  const std::vector<float> dy = RandomFloats(x.size(), 62);
  std::vector<float> want_y(x.size()), want_dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want_y[i] = static_cast<float>(pointwise::Silu(x[i]));
    want_dx[i] = static_cast<float>(dy[i] * pointwise::SiluGrad(x[i]));
  }
  DeviceVector<float> d_x(x), d_dy(dy), d_y(x.size()), d_dx(x.size());
  device_->ActivationForward(v1::SILU, d_x.get(), x.size(), d_y.get());
  device_->ActivationBackward(v1::SILU, d_x.get(), d_dy.get(), x.size(), d_dx.get());
  ASSERT_TRUE(device_->Synchronize().ok()) << device_->status();
  // The device computes in float (pointwise::SiluFloat, SiluGradFloat), a few ulps of
  // each value: over x ~ N(0, 4^2) (|x| reaches about 17) and dy ~ N(0, 1), the host's
  // float forms stay within 15% of these bounds (2e6 draws); the derivative crosses zero
  // near x = -1.28, so no relative bound alone.
  ExpectNear(d_y.ToHost(), want_y, 1e-6f, 2e-6f, "silu forward");
  ExpectNear(d_dx.ToHost(), want_dx, 1e-6f, 2e-6f, "silu backward");
}

}  // namespace
}  // namespace shardwise::cuda
