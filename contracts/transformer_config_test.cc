// The Llama's defaults: HF LlamaConfig's, and its rope_scaling as transformers reads it.

#include "contracts/transformer_config.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(WithLlamaDefaults, RopeScalingIsReadAsTransformersReadsIt) {
  v1::LlamaConfig none;
  EXPECT_FALSE(WithLlamaDefaults(none).has_rope_scaling());  // none stays none

  v1::LlamaConfig named_default;
  named_default.mutable_rope_scaling()->set_rope_type("default");
  EXPECT_FALSE(WithLlamaDefaults(named_default).has_rope_scaling());

  v1::LlamaConfig older_spelling;  // `type`, as transformers before 4.45 wrote it
  older_spelling.mutable_rope_scaling()->set_type("llama3");
  older_spelling.mutable_rope_scaling()->set_factor(8);
  const v1::LlamaConfig read = WithLlamaDefaults(older_spelling);
  EXPECT_EQ(read.rope_scaling().rope_type(), "llama3");
  EXPECT_EQ(read.rope_scaling().type(), "");
  EXPECT_TRUE(HasLlama3RopeScaling(read));

  // No type at all: kept, for the spec's check to refuse, not dropped in silence.
  v1::LlamaConfig untyped;
  untyped.mutable_rope_scaling()->set_factor(8);
  ASSERT_TRUE(WithLlamaDefaults(untyped).has_rope_scaling());
  EXPECT_EQ(WithLlamaDefaults(untyped).rope_scaling().factor(), 8);
}

TEST(WithLlamaDefaults, UnsetFieldsTakeLlamaConfigsDefaults) {
  v1::LlamaConfig llama;
  llama.set_hidden_size(64);
  llama.set_num_attention_heads(4);
  const v1::LlamaConfig c = WithLlamaDefaults(llama);
  EXPECT_EQ(c.num_key_value_heads(), 4);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.max_position_embeddings(), kLlamaDefaultMaxPositions);
  EXPECT_EQ(c.block_size(), kLlamaDefaultMaxPositions);
  EXPECT_EQ(c.rms_norm_eps(), 1e-6);
  EXPECT_EQ(c.rope_theta(), 10000.0);
  EXPECT_EQ(c.hidden_act(), "silu");
  EXPECT_EQ(c.attention(), v1::GptConfig::MATERIALIZED);
}

}  // namespace
}  // namespace shardwise
