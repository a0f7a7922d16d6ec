#include "contracts/model_description.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::ModelSpec Gpt(int n_layer, bool bias = true) {
  v1::ModelSpec model;
  v1::GptConfig* gpt = model.mutable_gpt();
  gpt->set_vocab_size(16);
  gpt->set_block_size(8);
  gpt->set_n_layer(n_layer);
  gpt->set_n_head(2);
  gpt->set_n_embd(6);
  gpt->set_bias(bias);
  return model;
}

TEST(DescribeModel, MlpParametersHaveNnSequentialNames) {
  v1::ModelSpec model;
  for (int w : {3, 5, 2}) model.add_layer_widths(w);
  auto d = DescribeModel(model);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->params.size(), 4u);
  EXPECT_EQ(d->params[0].name, "0.weight");
  EXPECT_EQ(d->params[0].shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(d->params[3].name, "2.bias");
  EXPECT_EQ(d->stages.size(), 2u);
  EXPECT_EQ(d->num_parameters(), 5 * 3 + 5 + 2 * 5 + 2);
}

// nanoGPT's named_parameters(): the tied lm_head.weight is transformer.wte.weight, once.
TEST(DescribeModel, GptHasNanoGptsNamesInRegistrationOrder) {
  auto d = DescribeModel(Gpt(2));
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<std::string> names;
  for (const ParameterDesc& p : d->params) names.push_back(p.name);
  ASSERT_EQ(names.size(), 2 + 2 * 12 + 2u);
  EXPECT_EQ(names[0], "transformer.wte.weight");
  EXPECT_EQ(names[1], "transformer.wpe.weight");
  EXPECT_EQ(names[2], "transformer.h.0.ln_1.weight");
  EXPECT_EQ(names[4], "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(names[13], "transformer.h.0.mlp.c_proj.bias");
  EXPECT_EQ(names[27], "transformer.ln_f.bias");
  EXPECT_EQ(d->params[4].shape, (std::vector<int64_t>{18, 6}));
  EXPECT_EQ(d->params[10].shape, (std::vector<int64_t>{24, 6}));  // c_fc
  EXPECT_EQ(d->FindParameter("lm_head.weight"), -1);
  // Stages: wte, wpe, two blocks, ln_f, lm_head; the head reads the token embedding.
  ASSERT_EQ(d->stages.size(), 6u);
  EXPECT_EQ(d->stages[5].params, (std::vector<int>{0}));
  EXPECT_TRUE(d->stages[2].checkpointable);
  EXPECT_FALSE(d->stages[5].checkpointable);
  // 2 * C biases and LayerNorm weights are vectors; matrices decay (nanoGPT's groups).
  EXPECT_TRUE(d->params[0].is_matrix());
  EXPECT_FALSE(d->params[2].is_matrix());
}

TEST(DescribeModel, GptWithoutBiasHasNone) {
  auto d = DescribeModel(Gpt(1, /*bias=*/false));
  ASSERT_TRUE(d.ok());
  for (const ParameterDesc& p : d->params)
    EXPECT_EQ(p.name.find("bias"), std::string::npos) << p.name;
  EXPECT_EQ(d->params.size(), 2 + 6 + 1u);
}

TEST(DescribeModel, RefusesABadGpt) {
  v1::ModelSpec model = Gpt(1);
  model.mutable_gpt()->set_n_head(4);  // 6 is not divisible by 4
  auto d = DescribeModel(model);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      d.status().message().find("job.model.gpt.n_embd: 6 is not divisible by model.gpt.n_head 4"),
      std::string::npos)
      << d.status();
  model = Gpt(1);
  model.add_layer_widths(3);
  EXPECT_EQ(DescribeModel(model).status().code(), absl::StatusCode::kInvalidArgument);
  model = Gpt(1);
  model.mutable_gpt()->set_vocab_size(int64_t{1} << 62);
  model.mutable_gpt()->set_n_embd(int64_t{1} << 40);
  EXPECT_NE(DescribeModel(model).status().message().find("64 bits"), std::string::npos);
}

TEST(AssignUnits, EachBlockIsAUnitAndTheRootHoldsTheRest) {
  auto d = DescribeModel(Gpt(2));
  ASSERT_TRUE(d.ok());
  auto units = AssignUnits(*d, v1::WrapPolicy());
  ASSERT_TRUE(units.ok()) << units.status();
  EXPECT_EQ(units->num_units, 3);
  EXPECT_EQ(units->unit_of_stage, (std::vector<int>{2, 2, 0, 1, 2, 2}));
  EXPECT_EQ(units->unit_of_param[0], 2);  // wte
  EXPECT_EQ(units->unit_of_param[2], 0);  // h.0.ln_1.weight
}

TEST(AssignUnits, ThePositionEmbeddingCanBeAUnitOfItsOwn) {
  auto d = DescribeModel(Gpt(1));
  v1::WrapPolicy wrap;
  wrap.add_modules(v1::WrapModule::BLOCK);
  wrap.add_modules(v1::WrapModule::POSITION_EMBEDDING);
  auto units = AssignUnits(*d, wrap);
  ASSERT_TRUE(units.ok()) << units.status();
  EXPECT_EQ(units->num_units, 3);
  EXPECT_EQ(units->unit_of_stage, (std::vector<int>{2, 0, 1, 2, 2}));
}

// Wrapping either user of the tied weight splits it from the other.
TEST(AssignUnits, RefusesAPolicyThatSplitsTheTiedWeight) {
  auto d = DescribeModel(Gpt(1));
  for (auto module : {v1::WrapModule::TOKEN_EMBEDDING, v1::WrapModule::LM_HEAD}) {
    v1::WrapPolicy wrap;
    wrap.add_modules(module);
    auto units = AssignUnits(*d, wrap);
    EXPECT_EQ(units.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(units.status().message().find("transformer.wte.weight"), std::string::npos)
        << units.status();
    EXPECT_NE(units.status().message().find("job.wrap"), std::string::npos);
  }
}

TEST(AssignUnits, MlpGroupsLayersAndRefusesGptPolicies) {
  v1::ModelSpec model;
  for (int w : {2, 3, 4, 5, 6}) model.add_layer_widths(w);
  auto d = DescribeModel(model);
  v1::WrapPolicy wrap;
  wrap.set_layers_per_unit(3);
  auto units = AssignUnits(*d, wrap);
  ASSERT_TRUE(units.ok());
  EXPECT_EQ(units->unit_of_stage, (std::vector<int>{0, 0, 0, 1}));
  wrap.add_modules(v1::WrapModule::BLOCK);
  EXPECT_EQ(AssignUnits(*d, wrap).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardwise
