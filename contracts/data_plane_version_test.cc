// A tripwire for kDataPlaneVersion: the flat layouts of reference models (each unit's
// parameters, their shapes and offsets, and its padded size at a world of 4) are what a
// collective's element count follows, and a release that changes them must not share an
// attempt with one that does not. The digest below is kDataPlaneVersion's; when a change
// makes this test fail, raise kDataPlaneVersion and put the new digest here with it.

#include "contracts/data_plane_version.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "contracts/fsdp_layout.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

// Its own reference models, not a shared helper's: a helper edited for another test
// would trip the digest with no change to the data plane.
v1::ModelSpec Mlp() {
  v1::ModelSpec model;
  for (int width : {4, 8, 3}) model.add_layer_widths(width);
  model.set_bias(true);
  return model;
}

v1::ModelSpec Gpt() {
  v1::ModelSpec model;
  v1::GptConfig* gpt = model.mutable_gpt();
  gpt->set_vocab_size(11);
  gpt->set_block_size(5);
  gpt->set_n_layer(2);
  gpt->set_n_head(2);
  gpt->set_n_embd(4);
  return model;
}

v1::ModelSpec LlamaWithGroupedQueries() {
  v1::ModelSpec model;
  v1::LlamaConfig* llama = model.mutable_llama();
  llama->set_vocab_size(13);
  llama->set_hidden_size(8);
  llama->set_intermediate_size(12);
  llama->set_num_hidden_layers(2);
  llama->set_num_attention_heads(4);
  llama->set_num_key_value_heads(2);
  llama->set_max_position_embeddings(16);
  return model;
}

// Each unit of `model`'s layout under the default wrap policy: its parameters with their
// shapes and offsets, its size and its size padded for 4 shards.
std::string DescribeLayout(const v1::ModelSpec& model) {
  auto layout = fsdp::BuildFlatLayout(model, v1::WrapPolicy());
  if (!layout.ok()) return layout.status().ToString();
  std::string text;
  for (const fsdp::UnitLayout& unit : layout->units) {
    absl::StrAppend(&text, "unit ", unit.numel, "/", fsdp::PaddedNumel(unit.numel, 4),
                    unit.is_root ? " root" : "", ":");
    for (int param : unit.params) {
      const ParameterDesc& desc = layout->model.params[param];
      absl::StrAppend(&text, " ", desc.name, "[", absl::StrJoin(desc.shape, "x"), "]@",
                      layout->slots[param].offset);
    }
    absl::StrAppend(&text, "\n");
  }
  return text;
}

// FNV-1a, 64 bits: stable across builds and platforms, unlike absl::Hash.
uint64_t Digest(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

TEST(DataPlaneVersion, TheReferenceLayoutsAreTheVersionsOwn) {
  const std::string layouts =
      DescribeLayout(Mlp()) + DescribeLayout(Gpt()) + DescribeLayout(LlamaWithGroupedQueries());
  EXPECT_EQ(kDataPlaneVersion, 1);
  EXPECT_EQ(Digest(layouts), 8659870875928087830u)
      << "the flat layouts changed: ranks of this release and of the last would disagree on "
         "a collective's size. Raise kDataPlaneVersion (contracts/data_plane_version.h) and "
         "put the new digest and version here. The layouts now:\n"
      << layouts;
}

}  // namespace
}  // namespace shardwise
