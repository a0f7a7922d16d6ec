#include "worker/model/rotary.h"

#include <cmath>

#include "contracts/transformer_config.h"

namespace shardwise::model {
namespace {

// HF's _compute_llama3_parameters on FP32 values: wavelengths longer than
// original / low_freq_factor are divided by `factor`, shorter than original /
// high_freq_factor kept, and those between blended by
// smooth = (original / wavelength - low) / (high - low). As there, the two wavelengths and
// high - low are Python floats (double), each rounded to FP32 once where it meets the
// tensor; the rest is FP32 arithmetic.
float Llama3Scaled(float inv_freq, const v1::RopeScaling& scaling) {
  const float factor = static_cast<float>(scaling.factor());
  const float low = static_cast<float>(scaling.low_freq_factor());
  const double original_in_double = static_cast<double>(scaling.original_max_position_embeddings());
  const float original = static_cast<float>(original_in_double);
  const float low_freq_wavelength =
      static_cast<float>(original_in_double / scaling.low_freq_factor());
  const float high_freq_wavelength =
      static_cast<float>(original_in_double / scaling.high_freq_factor());
  const float band = static_cast<float>(scaling.high_freq_factor() - scaling.low_freq_factor());
  const float wavelength = static_cast<float>(2 * M_PI) / inv_freq;
  const float scaled = wavelength > low_freq_wavelength ? inv_freq / factor : inv_freq;
  const bool medium = !(wavelength < high_freq_wavelength) && !(wavelength > low_freq_wavelength);
  if (!medium) return scaled;
  const float smooth = (original / wavelength - low) / band;
  return (1 - smooth) * scaled / factor + smooth * scaled;
}

}  // namespace

std::vector<float> RotaryInverseFrequencies(const v1::LlamaConfig& llama) {
  const int64_t dim = llama.head_dim();
  std::vector<float> inv_freq(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(llama.rope_theta()), exponent);
    if (HasLlama3RopeScaling(llama)) inv_freq[i] = Llama3Scaled(inv_freq[i], llama.rope_scaling());
  }
  return inv_freq;
}

RotaryHostTables ComputeRotaryTables(const v1::LlamaConfig& llama, int64_t positions) {
  const std::vector<float> inv_freq = RotaryInverseFrequencies(llama);
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  RotaryHostTables tables;
  tables.cos.resize(positions * half);
  tables.sin.resize(positions * half);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      tables.cos[p * half + i] = std::cos(angle);
      tables.sin[p * half + i] = std::sin(angle);
    }
  }
  return tables;
}

const RotaryTables::Device& RotaryTables::Ready(const StageContext& context) {
  if (made_on_ == context.device) return device_;
  const RotaryHostTables host = ComputeRotaryTables(llama_, llama_.block_size());
  auto upload = [&](const std::vector<float>& values) {
    Buffer buffer = context.FloatActivations(values.size());
    context.device->CopyFromHost(buffer.data(), values.data(), buffer.bytes());
    context.Round(buffer);
    return buffer;
  };
  device_.cos = upload(host.cos);
  device_.sin = upload(host.sin);
  made_on_ = context.device;
  return device_;
}

}  // namespace shardwise::model
