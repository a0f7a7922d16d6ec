#ifndef SHARDWISE_WORKER_TESTING_MODEL_COMPARE_H_
#define SHARDWISE_WORKER_TESTING_MODEL_COMPARE_H_

// Compares two models by nn.Sequential names, elementwise, as PyTorch's tests compare
// tensors: |got - want| <= atol + rtol * |want|. For tests.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "common/safetensors.h"

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
        return ::testing::AssertionFailure()
               << name << "[" << i << "] = " << g << ", expected " << w << " (rtol " << rtol
               << ", atol " << atol << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_MODEL_COMPARE_H_
