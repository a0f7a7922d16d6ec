#ifndef SHARDWISE_WORKER_TESTING_MODEL_COMPARE_H_
#define SHARDWISE_WORKER_TESTING_MODEL_COMPARE_H_

// Compares two models by their tensors' names: elementwise, as PyTorch's tests compare
// tensors (|got - want| <= atol + rtol * |want|), or tensor by tensor (relative L2
// distance). For tests.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"

namespace shardwise::testing {

// Success, or a failure naming the first tensor and element out of tolerance.
inline ::testing::AssertionResult ModelsClose(const TensorMap& got, const TensorMap& want,
                                              double rtol, double atol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "got " << got.size() << " tensors, expected " << want.size();
  }
  for (const auto& [name, expected] : want) {
    auto it = got.find(name);
    if (it == got.end()) return ::testing::AssertionFailure() << "no tensor " << name;
    const HostTensor& actual = it->second;
    if (actual.shape != expected.shape) {
      return ::testing::AssertionFailure() << name << ": shapes differ";
    }
    for (int64_t i = 0; i < expected.numel(); ++i) {
      const double w = expected.f32()[i], g = actual.f32()[i];
      if (!(std::abs(g - w) <= atol + rtol * std::abs(w))) {
        return ::testing::AssertionFailure() << name << "[" << i << "] = " << g << ", expected "
                                             << w << " (rtol " << rtol << ", atol " << atol << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Success, or a failure naming the first tensor whose relative L2 distance
// |got - want| / |want| exceeds `rtol`. For low-precision runs, whose elements are not
// comparable one by one (docs/semantics.md, "Tolerances"): an element whose gradient is
// below the dtype's resolution moves by rounding noise.
inline ::testing::AssertionResult TensorsCloseL2(const TensorMap& got, const TensorMap& want,
                                                 double rtol, double* worst = nullptr) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "got " << got.size() << " tensors, expected " << want.size();
  }
  if (worst != nullptr) *worst = 0;
  for (const auto& [name, expected] : want) {
    auto it = got.find(name);
    if (it == got.end()) return ::testing::AssertionFailure() << "no tensor " << name;
    if (it->second.shape != expected.shape) {
      return ::testing::AssertionFailure() << name << ": shapes differ";
    }
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < expected.numel(); ++i) {
      const double w = expected.f32()[i], g = it->second.f32()[i];
      diff += (g - w) * (g - w);
      norm += w * w;
    }
    const double relative = std::sqrt(diff / std::max(norm, 1e-30));
    if (worst != nullptr) *worst = std::max(*worst, relative);
    if (!(relative <= rtol)) {
      return ::testing::AssertionFailure()
             << name << ": relative L2 distance " << relative << " exceeds " << rtol;
    }
  }
  return ::testing::AssertionSuccess();
}

// A GPT's key biases (the middle third of each attn.c_attn.bias, `n_embd` wide) have an exact
// gradient of zero (adding a constant to every key adds q.b to all of a row's scores, which
// softmax ignores), so what they hold is rounding noise that Adam's normalisation
// amplifies, differently in any two programs. Returns `model` with them zeroed for the
// comparisons above, and sets `*largest` to their largest magnitude, to be held to what
// the run's learning rate can reach.
inline TensorMap WithoutGptKeyBiases(TensorMap model, int64_t n_embd, double* largest) {
  *largest = 0;
  for (auto& [name, tensor] : model) {
    if (name.find("attn.c_attn.bias") == std::string::npos) continue;
    for (int64_t i = n_embd; i < 2 * n_embd && i < tensor.numel(); ++i) {
      *largest = std::max(*largest, static_cast<double>(std::abs(tensor.f32()[i])));
      const float zero = 0;
      std::memcpy(&tensor.bytes[i * sizeof(float)], &zero, sizeof(float));
    }
  }
  return model;
}

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_MODEL_COMPARE_H_
