#ifndef SHARDWISE_WORKER_COMPUTE_NORM_ROWS_H_
#define SHARDWISE_WORKER_COMPUTE_NORM_ROWS_H_

// LayerNorm and RMSNorm one row per GPU warp, in float: the arithmetic the CUDA kernels
// (cuda/transformer_kernels.cu, cuda/llama_kernels.cu) run, written once so that the CPU
// tests (norm_rows_test) check it against the formulas in FP64. The order of the sums is
// the GPU's; the bits may differ by nvcc's contraction of a multiply and an add into one
// FMA, which the host build does not do. The CPU's own layers
// (cpu/layer_norm.cc, cpu/llama_layers.cc) keep their double sums; the GPU sums in float,
// as PyTorch's CUDA LayerNorm and Hugging Face's RMSNorm (which computes its variance in
// float32) do, and differs from the CPU by rounding (docs/semantics.md).
//
// The order of every sum is fixed, so a kernel gives the same bits on every run: a row is
// read in groups of kVector consecutive floats (one 16-byte load each where the row allows
// it), group g by lane g % kLanes; each lane adds its groups' terms in order; then the
// lanes' sums are combined by the warp's butterfly, each of its five steps adding to every
// lane the value of the lane `offset` away (offset 16, 8, 4, 2, 1: __shfl_xor_sync on the
// GPU, ButterflySum here), which leaves the same total in every lane.
//
// Formulas (per row of `dim`, g = dy * w):
//   LayerNorm: mean = sum(x) / dim, var = sum((x - mean)^2) / dim, rstd = 1 / sqrt(var +
//     eps), y = (x - mean) * rstd * w + b; dx = rstd * (g - mean(g) - xhat *
//     mean(g * xhat)), xhat = (x - mean) * rstd.
//   RMSNorm: rstd = 1 / sqrt(sum(x^2) / dim + eps), y = w * (x * rstd);
//     dx = rstd * g - x * rstd^3 * sum(g * x) / dim.

#include <cmath>
#include <cstdint>

#include "worker/compute/host_device.h"

namespace shardwise::norm_rows {

inline constexpr int kLanes = 32;  // a warp
inline constexpr int kVector = 4;  // floats per 16-byte load

// Up to kVector consecutive values of a row (a group); past the row's end, zeros.
struct Quad {
  float v[kVector];
};

// Group g of `row` (of `dim`), read value by value: what the GPU's 16-byte load reads where
// the row is aligned and holds the whole group. W: float, or a 16-bit storage type (a
// weight stored in a GPU job's param_dtype), widened exactly by its conversion to float.
template <typename W>
SHARDWISE_HOST_DEVICE Quad ScalarQuad(const W* row, int64_t g, int64_t dim) {
  Quad q{};
  for (int k = 0; k < kVector; ++k) {
    const int64_t j = g * kVector + k;
    q.v[k] = j < dim ? static_cast<float>(row[j]) : 0.0f;
  }
  return q;
}

// The groups of a row of `dim`.
SHARDWISE_HOST_DEVICE inline int64_t Groups(int64_t dim) { return (dim + kVector - 1) / kVector; }

// Lane `lane`'s sum of the terms of its groups (g = lane, lane + kLanes, ...) in order:
// `terms(g)` gives group g's kVector terms (those past the row's end are not added).
template <typename Terms>
SHARDWISE_HOST_DEVICE float LaneSum(int lane, int64_t dim, const Terms& terms) {
  float sum = 0.0f;
  for (int64_t g = lane; g < Groups(dim); g += kLanes) {
    const Quad t = terms(g);
    const int64_t valid = dim - g * kVector;
    for (int k = 0; k < kVector; ++k) {
      if (k < valid) sum += t.v[k];
    }
  }
  return sum;
}

// The warp's butterfly over the lanes' values, as __shfl_xor_sync leaves it in lane 0.
inline float ButterflySum(const float (&lanes)[kLanes]) {
  float values[kLanes];
  for (int l = 0; l < kLanes; ++l) values[l] = lanes[l];
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    float next[kLanes];
    for (int l = 0; l < kLanes; ++l) next[l] = values[l] + values[l ^ offset];
    for (int l = 0; l < kLanes; ++l) values[l] = next[l];
  }
  return values[0];
}

// The warp's total of `terms` over a row, summed on the host in the GPU's order.
template <typename Terms>
float WarpRowSum(int64_t dim, const Terms& terms) {
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = LaneSum(l, dim, terms);
  return ButterflySum(lanes);
}

// ---- terms -----------------------------------------------------------------------------
//
// Every product that an add or subtract follows is RoundedProduct (host_device.h): the
// GPU's instantiations for FP32 and 16-bit storage then round each as the host does, so
// the two storages' results are bit for bit the same where their values are.

SHARDWISE_HOST_DEVICE inline Quad Squares(Quad q, float centre) {
  for (float& v : q.v) v = RoundedProduct(v - centre, v - centre);
  return q;
}

SHARDWISE_HOST_DEVICE inline Quad Products(Quad a, const Quad& b) {
  for (int k = 0; k < kVector; ++k) a.v[k] = RoundedProduct(a.v[k], b.v[k]);
  return a;
}

// w's group g (1 where the layer has no weight), read value by value: w lies wherever its
// unit's flat parameter puts it, so it may not be 16-byte aligned.
template <typename W>
SHARDWISE_HOST_DEVICE Quad WeightQuad(const W* w, int64_t g, int64_t dim) {
  if (w != nullptr) return ScalarQuad(w, g, dim);
  return Quad{{1.0f, 1.0f, 1.0f, 1.0f}};
}

// LayerNorm's backward terms of group g: g = dy * w and xhat = (x - mean) * rstd.
SHARDWISE_HOST_DEVICE inline Quad Xhat(Quad x, float mean, float rstd) {
  for (float& v : x.v) v = RoundedProduct(v - mean, rstd);
  return x;
}

// ---- rows --------------------------------------------------------------------------------
//
// The row routines take the row's loads (`x(g)`, `dy(g)`: a group of the row, as Quad), a
// `reduce(dim, terms)` that returns the warp's total of a row's terms in every lane (the
// GPU: LaneSum then the shuffles; the host: WarpRowSum) and the groups the caller writes
// (`Writer`: a GPU lane writes its own, g = lane, lane + kLanes, ...; the host all).

struct Writer {
  int64_t first, step;
};
inline constexpr Writer kWholeRow{0, 1};

struct Moments {
  float mean, rstd;
};

SHARDWISE_HOST_DEVICE inline float Rstd(float squares, int64_t dim, float eps) {
  return 1.0f / sqrtf(squares / static_cast<float>(dim) + eps);
}

// Writes y's groups (w, b null: 1 and 0); returns the row's mean and 1/std. `Out` is a
// float* or what stores a float into another type by `y[j] = value` (a 16-bit row on the
// GPU, cuda/storage_elements.cuh), here and in the routines below; the weights W as
// ScalarQuad reads them.
template <typename Load, typename W, typename Reduce, typename Out>
SHARDWISE_HOST_DEVICE Moments LayerNormForwardRow(const Load& x, const W* w, const W* b,
                                                  int64_t dim, float eps, const Reduce& reduce,
                                                  Writer writer, Out y) {
  const float mean = reduce(dim, x) / static_cast<float>(dim);
  const float squares = reduce(dim, [&](int64_t g) { return Squares(x(g), mean); });
  const float rstd = Rstd(squares, dim, eps);
  for (int64_t g = writer.first; g < Groups(dim); g += writer.step) {
    const Quad in = x(g);
    for (int k = 0; k < kVector && g * kVector + k < dim; ++k) {
      const int64_t j = g * kVector + k;
      const float weight = w != nullptr ? static_cast<float>(w[j]) : 1.0f;
      const float bias = b != nullptr ? static_cast<float>(b[j]) : 0.0f;
      y[j] = RoundedProduct(RoundedProduct(in.v[k] - mean, rstd), weight) + bias;
    }
  }
  return {mean, rstd};
}

// Writes dx's groups from the forward's mean and rstd.
template <typename Load, typename W, typename Reduce, typename Out>
SHARDWISE_HOST_DEVICE void LayerNormInputGradRow(const Load& x, const Load& dy, const W* w,
                                                 Moments moments, int64_t dim, const Reduce& reduce,
                                                 Writer writer, Out dx) {
  const auto g_of = [&](int64_t g) { return Products(dy(g), WeightQuad(w, g, dim)); };
  const auto xhat_of = [&](int64_t g) { return Xhat(x(g), moments.mean, moments.rstd); };
  const float n = static_cast<float>(dim);
  const float g_mean = reduce(dim, g_of) / n;
  const float g_xhat_mean =
      reduce(dim, [&](int64_t g) { return Products(g_of(g), xhat_of(g)); }) / n;
  for (int64_t g = writer.first; g < Groups(dim); g += writer.step) {
    const Quad grad = g_of(g), xhat = xhat_of(g);
    for (int k = 0; k < kVector && g * kVector + k < dim; ++k) {
      dx[g * kVector + k] =
          moments.rstd * (grad.v[k] - g_mean - RoundedProduct(xhat.v[k], g_xhat_mean));
    }
  }
}

// Writes y's groups (y = w * (x * rstd), w = 1 where absent); returns rstd.
template <typename Load, typename W, typename Reduce, typename Out>
SHARDWISE_HOST_DEVICE float RmsNormForwardRow(const Load& x, const W* w, int64_t dim, float eps,
                                              const Reduce& reduce, Writer writer, Out y) {
  const float rstd = Rstd(reduce(dim, [&](int64_t g) { return Squares(x(g), 0.0f); }), dim, eps);
  for (int64_t g = writer.first; g < Groups(dim); g += writer.step) {
    const Quad in = x(g);
    for (int k = 0; k < kVector && g * kVector + k < dim; ++k) {
      const int64_t j = g * kVector + k;
      const float weight = w != nullptr ? static_cast<float>(w[j]) : 1.0f;
      y[j] = weight * (in.v[k] * rstd);
    }
  }
  return rstd;
}

// Writes dx's groups: rstd * g - x * rstd^3 * sum(g * x) / dim, g = dy * w.
template <typename Load, typename W, typename Reduce, typename Out>
SHARDWISE_HOST_DEVICE void RmsNormInputGradRow(const Load& x, const Load& dy, const W* w,
                                               float rstd, int64_t dim, const Reduce& reduce,
                                               Writer writer, Out dx) {
  const auto g_of = [&](int64_t g) { return Products(dy(g), WeightQuad(w, g, dim)); };
  const float dot = reduce(dim, [&](int64_t g) { return Products(g_of(g), x(g)); });
  const float coefficient = rstd * rstd * rstd * dot / static_cast<float>(dim);
  for (int64_t g = writer.first; g < Groups(dim); g += writer.step) {
    const Quad grad = g_of(g), in = x(g);
    for (int k = 0; k < kVector && g * kVector + k < dim; ++k) {
      dx[g * kVector + k] = RoundedProduct(rstd, grad.v[k]) - RoundedProduct(in.v[k], coefficient);
    }
  }
}

// ---- the host's model of a warp -----------------------------------------------------------

// The warp's total, as every GPU lane gets it.
struct HostWarp {
  template <typename Terms>
  float operator()(int64_t dim, const Terms& terms) const {
    return WarpRowSum(dim, terms);
  }
};

// A row's groups read value by value.
struct HostRow {
  const float* row;
  int64_t dim;
  Quad operator()(int64_t g) const { return ScalarQuad(row, g, dim); }
};

}  // namespace shardwise::norm_rows

#endif  // SHARDWISE_WORKER_COMPUTE_NORM_ROWS_H_
