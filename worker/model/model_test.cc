// The model layer without FSDP: a small GPT's and a small Llama's gradients against finite
// differences of their own loss (float32, so the tolerance is loose; the layers' arithmetic is
// checked in float64 by compute/cpu/gradient_check_test), activation checkpointing, and sampling.

#include "worker/model/model.h"

#include <cmath>
#include <memory>

#include "gtest/gtest.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/data/random.h"
#include "worker/data/weights.h"
#include "worker/model/host_parameters.h"
#include "worker/model/rotary.h"
#include "worker/model/sampler.h"

namespace shardwise::model {
namespace {

v1::JobSpec GptSpec(bool checkpointing = false, bool bias = true,
                    v1::Activation activation = v1::GELU) {
  v1::JobSpec spec;
  v1::GptConfig* gpt = spec.mutable_model()->mutable_gpt();
  gpt->set_bias(bias);
  gpt->set_activation(activation);
  gpt->set_vocab_size(7);
  gpt->set_block_size(5);
  gpt->set_n_layer(2);
  gpt->set_n_head(2);
  gpt->set_n_embd(8);
  spec.set_activation_checkpointing(checkpointing);
  return spec;
}

// A Llama with every option a config can turn on: grouped-query attention, biases, an
// untied head (or a tied one), llama3 rotary scaling with bands that each frequency falls in.
v1::JobSpec LlamaSpec(bool tied = false, bool checkpointing = false) {
  v1::JobSpec spec;
  v1::LlamaConfig* llama = spec.mutable_model()->mutable_llama();
  llama->set_vocab_size(7);
  llama->set_hidden_size(8);
  llama->set_intermediate_size(12);
  llama->set_num_hidden_layers(2);
  llama->set_num_attention_heads(4);
  llama->set_num_key_value_heads(2);
  llama->set_head_dim(4);
  llama->set_max_position_embeddings(5);
  llama->set_attention_bias(true);
  llama->set_mlp_bias(true);
  llama->set_tie_word_embeddings(tied);
  llama->set_rope_theta(100);
  v1::RopeScaling* scaling = llama->mutable_rope_scaling();
  scaling->set_rope_type("llama3");
  scaling->set_factor(4);
  scaling->set_low_freq_factor(1);
  scaling->set_high_freq_factor(4);
  scaling->set_original_max_position_embeddings(16);
  spec.set_activation_checkpointing(checkpointing);
  return spec;
}

MicroBatch Batch() {
  MicroBatch batch;
  batch.sequences = 2;
  batch.sequence_length = 4;
  batch.rows = 8;
  batch.tokens = {1, 5, 2, 2, 6, 0, 3, 1};
  batch.labels = {5, 2, 2, 4, 0, 3, 1, 1};
  return batch;
}

class ModelHarness {
 public:
  explicit ModelHarness(const v1::JobSpec& spec)
      : spec_(spec), description_(*DescribeModel(spec.model())), device_(&allocator_) {
    // Larger than nanoGPT's 0.02 so every path carries a gradient well above float noise.
    TensorMap weights = SeededWeights(spec.model(), 3);
    Random random(9);
    for (auto& [name, tensor] : weights) {
      std::vector<float> values(tensor.numel());
      for (int64_t i = 0; i < tensor.numel(); ++i) {
        values[i] = tensor.f32()[i] + static_cast<float>(0.3 * random.Normal());
      }
      tensor = F32Tensor(tensor.shape, values.data());
    }
    params_ = std::make_unique<HostParameters>(*HostParameters::FromTensors(description_, weights));
    model_ = std::move(*Model::Create(spec, description_));
  }

  // The loss; with `backward`, the parameters' gradients too.
  double Run(bool backward) {
    params_->ZeroGrads();
    model_->Begin(Batch(), &device_, ScalarType::kFloat32);
    for (int s = 0; s < model_->num_stages(); ++s) model_->Forward(s, *params_);
    double loss = 0;  // the CPU device's memory is the host's
    model_->Loss(1.0f, &loss);
    if (backward) {
      for (int s = model_->num_stages() - 1; s >= 0; --s) model_->Backward(s, *params_);
    }
    model_->End();
    return loss;
  }

  const ModelDescription& description() const { return description_; }
  HostParameters& params() { return *params_; }
  MemoryStats memory() const { return allocator_.Stats(); }

 private:
  v1::JobSpec spec_;
  ModelDescription description_;
  CpuCachingAllocator allocator_;
  CpuDevice device_;
  std::unique_ptr<HostParameters> params_;
  std::unique_ptr<Model> model_;
};

struct Variant {
  std::string name;
  v1::JobSpec spec;
};

class Gradients : public ::testing::TestWithParam<Variant> {};

TEST_P(Gradients, MatchFiniteDifferencesOfTheLoss) {
  ModelHarness gpt(GetParam().spec);
  gpt.Run(/*backward=*/true);
  const ModelDescription& d = gpt.description();
  std::vector<std::vector<float>> grads;  // before the differences' runs reset them
  grads.reserve(static_cast<int>(d.params.size()));
  for (int p = 0; p < static_cast<int>(d.params.size()); ++p)
    grads.push_back(gpt.params().grads(p));
  int checked = 0;
  for (int p = 0; p < static_cast<int>(d.params.size()); ++p) {
    std::vector<float>& values = gpt.params().values(p);
    const std::vector<float>& analytic = grads[p];
    // Every element of small tensors, a spread of the larger ones.
    const size_t step = std::max<size_t>(1, values.size() / 12);
    for (size_t i = 0; i < values.size(); i += step) {
      const float saved = values[i];
      const float eps = 1e-2f;
      values[i] = saved + eps;
      const double plus = gpt.Run(false);
      values[i] = saved - eps;
      const double minus = gpt.Run(false);
      values[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << d.params[p].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 150);
}

INSTANTIATE_TEST_SUITE_P(Variants, Gradients,
                         ::testing::Values(Variant{"GptBias_GELU", GptSpec(false, true, v1::GELU)},
                                           Variant{"GptNoBias_GELU_TANH",
                                                   GptSpec(false, false, v1::GELU_TANH)},
                                           Variant{"LlamaUntied", LlamaSpec(false)},
                                           Variant{"LlamaTied", LlamaSpec(true)}),
                         [](const auto& info) { return info.param.name; });

// The LM head's weight is the token embedding's: its gradient sums both uses. Row 4 is a
// label but never an input, so only the head reaches it; row 1 is both.
TEST(GptModel, TheTiedWeightsGradientSumsTheHeadAndTheEmbedding) {
  ModelHarness gpt(GptSpec());
  gpt.Run(true);
  const int wte = gpt.description().FindParameter("transformer.wte.weight");
  const std::vector<float> both = gpt.params().grads(wte);
  bool row4_nonzero = false;
  for (int j = 0; j < 8; ++j) row4_nonzero |= both[4 * 8 + j] != 0.0f;
  EXPECT_TRUE(row4_nonzero) << "the head's contribution is missing";
}

class Checkpointing : public ::testing::TestWithParam<bool> {};

TEST_P(Checkpointing, GivesTheSameGradientsWithLessMemory) {
  const bool llama = GetParam();
  ModelHarness plain(llama ? LlamaSpec(false, false) : GptSpec(false));
  ModelHarness checkpointed(llama ? LlamaSpec(false, true) : GptSpec(true));
  EXPECT_EQ(plain.Run(true), checkpointed.Run(true));
  for (int p = 0; p < static_cast<int>(plain.description().params.size()); ++p) {
    EXPECT_EQ(plain.params().grads(p), checkpointed.params().grads(p))
        << plain.description().params[p].name;
  }
  EXPECT_LT(checkpointed.memory().peak(MemoryCategory::kActivations),
            plain.memory().peak(MemoryCategory::kActivations));
}

INSTANTIATE_TEST_SUITE_P(BothTransformers, Checkpointing, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Llama" : "Gpt"; });

class Sampler : public ::testing::TestWithParam<bool> {};

TEST_P(Sampler, GreedyAndSeededSamplingAreDeterministic) {
  const v1::JobSpec spec = GetParam() ? LlamaSpec() : GptSpec();
  const TensorMap weights = SeededWeights(spec.model(), 1);
  SampleOptions greedy;
  greedy.tokens = 9;  // past block_size: the context slides
  greedy.temperature = 0;
  auto a = Generate(spec.model(), weights, {3, 1}, greedy);
  auto b = Generate(spec.model(), weights, {3, 1}, greedy);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->size(), 11u);
  EXPECT_EQ(*a, *b);
  SampleOptions random;
  random.tokens = 30;
  random.temperature = 1.0;
  random.top_k = 3;
  random.seed = 5;
  auto c = Generate(spec.model(), weights, {3}, random);
  auto d = Generate(spec.model(), weights, {3}, random);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, *d);
  for (int64_t id : *c) EXPECT_TRUE(id >= 0 && id < 7);
  EXPECT_EQ(Generate(spec.model(), weights, {9}, greedy).status().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(BothTransformers, Sampler, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Llama" : "Gpt"; });

// llama3 rope scaling as HF computes it: the wavelengths' bounds and high - low are Python
// floats, rounded to FP32 once; with factors FP32 cannot hold (1.1, 2.9) an FP32 quotient
// of FP32 operands is an ulp off, and some inverse frequencies with it.
TEST(Rotary, Llama3ScalingRoundsItsConstantsAsHfDoes) {
  v1::LlamaConfig llama;
  llama.set_head_dim(128);
  llama.set_rope_theta(1e6);
  v1::RopeScaling* scaling = llama.mutable_rope_scaling();
  scaling->set_rope_type("llama3");
  scaling->set_factor(4);
  scaling->set_low_freq_factor(1.1);
  scaling->set_high_freq_factor(2.9);
  scaling->set_original_max_position_embeddings(4096);
  const std::vector<float> scaled = RotaryInverseFrequencies(llama);
  llama.clear_rope_scaling();
  const std::vector<float> plain = RotaryInverseFrequencies(llama);
  const float low_wavelength = static_cast<float>(4096 / 1.1);
  const float high_wavelength = static_cast<float>(4096 / 2.9);
  const float band = static_cast<float>(2.9 - 1.1);
  ASSERT_NE(low_wavelength, 4096.0f / 1.1f);  // the case where the rounding shows
  int in_band = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const float wavelength = static_cast<float>(2 * M_PI) / plain[i];
    float want = wavelength > low_wavelength ? plain[i] / 4.0f : plain[i];
    if (!(wavelength < high_wavelength) && !(wavelength > low_wavelength)) {
      const float smooth = (4096.0f / wavelength - 1.1f) / band;
      want = (1 - smooth) * want / 4.0f + smooth * want;
      ++in_band;
    }
    EXPECT_EQ(scaled[i], want) << i;
  }
  EXPECT_GT(in_band, 0);
}

}  // namespace
}  // namespace shardwise::model
