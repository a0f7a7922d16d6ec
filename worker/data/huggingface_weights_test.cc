// Hugging Face checkpoints read and written (huggingface_weights.h, with the layout of
// contracts/huggingface_layout.h) on real files: the errors a user sees for a checkpoint
// that does not fit, GPT-2's transposed Conv1D weights and unprefixed names, HF's ignored
// buffers, 16-bit weights, sharded folders, and Meta's interleaved rotary rows.

#include "worker/data/huggingface_weights.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/testing/scratch.h"
#include "common/untrusted_file.h"
#include "contracts/huggingface_layout.h"
#include "contracts/weights_file.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/compute/casts.h"
#include "worker/data/weights.h"

namespace shardwise {
namespace {

std::string Dir(const std::string& name) {
  return testing::FreshScratchFolder(absl::StrCat("hf-", name));
}

v1::ModelSpec Llama(bool tied = false) {
  v1::ModelSpec model;
  v1::LlamaConfig* llama = model.mutable_llama();
  llama->set_vocab_size(11);
  llama->set_hidden_size(8);
  llama->set_intermediate_size(12);
  llama->set_num_hidden_layers(2);
  llama->set_num_attention_heads(4);
  llama->set_num_key_value_heads(2);
  llama->set_max_position_embeddings(16);
  llama->set_tie_word_embeddings(tied);
  return model;
}

v1::ModelSpec Gpt() {
  v1::ModelSpec model;
  v1::GptConfig* gpt = model.mutable_gpt();
  gpt->set_vocab_size(11);
  gpt->set_block_size(8);
  gpt->set_n_layer(2);
  gpt->set_n_head(2);
  gpt->set_n_embd(8);
  gpt->set_activation(v1::GELU_TANH);
  return model;
}

// Writes `weights` (HF's names) and the model's config.json as a checkpoint folder.
v1::HuggingFaceCheckpoint Write(const std::string& dir, const v1::ModelSpec& model,
                                const TensorMap& weights) {
  EXPECT_TRUE(WriteSafetensors(dir + "/model.safetensors", weights).ok());
  std::ofstream(dir + "/config.json") << HuggingFaceConfigJson(model);
  v1::HuggingFaceCheckpoint checkpoint;
  checkpoint.set_dir(dir);
  return checkpoint;
}

// Writes `shards` (HF's names) as a sharded checkpoint folder: model-0000S-of-0000N files,
// the index naming each tensor's, and the model's config.json.
v1::HuggingFaceCheckpoint WriteSharded(const std::string& dir, const v1::ModelSpec& model,
                                       const std::vector<TensorMap>& shards) {
  std::string weight_map;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string shard =
        absl::StrCat("model-0000", s + 1, "-of-0000", shards.size(), ".safetensors");
    EXPECT_TRUE(WriteSafetensors(absl::StrCat(dir, "/", shard), shards[s]).ok());
    for (const auto& [name, unused] : shards[s]) {
      absl::StrAppend(&weight_map, weight_map.empty() ? "" : ",", "\"", name, "\":\"", shard, "\"");
    }
  }
  std::ofstream(dir + "/model.safetensors.index.json") << "{\"weight_map\":{" << weight_map << "}}";
  std::ofstream(dir + "/config.json") << HuggingFaceConfigJson(model);
  v1::HuggingFaceCheckpoint checkpoint;
  checkpoint.set_dir(dir);
  return checkpoint;
}

absl::Status Check(const v1::ModelSpec& model, const v1::HuggingFaceCheckpoint& checkpoint) {
  return LocateHuggingFaceTensors(model, checkpoint, "job.init.huggingface", Links::kFollow)
      .status();
}

// Wants part `part` of `parts` equal runs of each tensor's elements (cut mid-row), and
// appends what it is given to `got` by name.
class PartReceiver : public ParameterReceiver {
 public:
  PartReceiver(int part, int parts, std::map<std::string, std::vector<float>>* got)
      : part_(part), parts_(parts), got_(got) {}
  ElementRange Wanted(const std::string&, int64_t numel) const override {
    return {numel * part_ / parts_, numel * (part_ + 1) / parts_};
  }
  absl::Status Take(const std::string& name, const ParameterPiece& piece) override {
    EXPECT_EQ(piece.range.begin, Wanted(name, piece.numel()).begin) << name;
    EXPECT_EQ(piece.range.end, Wanted(name, piece.numel()).end) << name;
    std::vector<float>& values = (*got_)[name];
    values.insert(values.end(), piece.values, piece.values + piece.range.size());
    return absl::OkStatus();
  }

 private:
  const int part_, parts_;
  std::map<std::string, std::vector<float>>* got_;
};

// Read in three parts, as three ranks would read their shards, the checkpoint gives
// `weights` (the model's layout) part by part.
void ExpectPartsMakeTheWhole(const v1::ModelSpec& model,
                             const v1::HuggingFaceCheckpoint& checkpoint,
                             const TensorMap& weights) {
  std::map<std::string, std::vector<float>> got;
  for (int part = 0; part < 3; ++part) {
    PartReceiver receiver(part, 3, &got);
    ASSERT_TRUE(ReadHuggingFaceWeights(model, checkpoint, receiver).ok());
  }
  ASSERT_EQ(got.size(), weights.size());
  for (const auto& [name, tensor] : weights) {
    EXPECT_EQ(got[name], std::vector<float>(tensor.f32(), tensor.f32() + tensor.numel())) << name;
  }
}

TEST(HuggingFaceWeights, AGptRoundTripsThroughGpt2sLayout) {
  const v1::ModelSpec model = Gpt();
  const TensorMap weights = SeededWeights(model, 4);
  auto hf = ToHuggingFaceLayout(model, weights);
  ASSERT_TRUE(hf.ok()) << hf.status();
  // Conv1D: c_fc's weight is [in, out] = [8, 32], element (i, o) our (o, i).
  const HostTensor& ours = weights.at("transformer.h.0.mlp.c_fc.weight");
  const HostTensor& theirs = hf->at("transformer.h.0.mlp.c_fc.weight");
  ASSERT_EQ(theirs.shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(theirs.f32()[3 * 32 + 5], ours.f32()[5 * 8 + 3]);
  // GPT2Model's names (no "transformer."), with its attention buffers: read back exactly.
  TensorMap unprefixed;
  for (const auto& [name, tensor] : *hf) {
    unprefixed[absl::StrReplaceAll(name, {{"transformer.", ""}})] = tensor;
  }
  unprefixed["h.0.attn.bias"] = F32Tensor({1}, std::vector<float>{1}.data());
  const v1::HuggingFaceCheckpoint checkpoint = Write(Dir("gpt"), model, unprefixed);
  const auto read = ReadHuggingFaceWeights(model, checkpoint);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), weights.size());
  for (const auto& [name, tensor] : weights) EXPECT_EQ(read->at(name).bytes, tensor.bytes) << name;
  ExpectPartsMakeTheWhole(model, checkpoint, weights);
  // Written a tensor at a time, the same bytes as the map.
  const std::string path = Dir("gpt-streamed") + "/model.safetensors";
  const Metadata metadata{{"shardwise.job", "job-s"}};
  ASSERT_TRUE(WriteInHuggingFaceLayout(path, model, weights, metadata, false).ok());
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
            EncodeSafetensors(*hf, metadata));
}

class SixteenBitShards : public ::testing::TestWithParam<ScalarType> {};

TEST_P(SixteenBitShards, AreWidenedExactly) {
  const v1::ModelSpec model = Llama();
  const bool bf16_type = GetParam() == ScalarType::kBFloat16;
  const std::string dir = Dir(bf16_type ? "bf16" : "f16");
  std::vector<TensorMap> bf16(2);
  TensorMap expected;
  int k = 0;
  for (const auto& [name, tensor] : SeededWeights(model, 5)) {
    HostTensor narrow{bf16_type ? "BF16" : "F16", tensor.shape,
                      std::string(2 * tensor.numel(), '\0')};
    auto* bits = reinterpret_cast<uint16_t*>(narrow.bytes.data());
    cpu::Narrow(GetParam(), tensor.f32(), bits, tensor.numel());
    std::vector<float> widened(tensor.numel());
    cpu::Widen(GetParam(), bits, widened.data(), widened.size());
    expected[name] = F32Tensor(tensor.shape, widened.data());
    bf16[k++ % 2][name] = narrow;
  }
  const v1::HuggingFaceCheckpoint checkpoint = WriteSharded(dir, model, bf16);
  auto read = ReadHuggingFaceWeights(model, checkpoint);
  ASSERT_TRUE(read.ok()) << read.status();
  for (const auto& [name, tensor] : expected) EXPECT_EQ(read->at(name).bytes, tensor.bytes) << name;
  ExpectPartsMakeTheWhole(model, checkpoint, expected);
}

INSTANTIATE_TEST_SUITE_P(BFloat16AndFloat16, SixteenBitShards,
                         ::testing::Values(ScalarType::kBFloat16, ScalarType::kFloat16),
                         [](const auto& info) {
                           return info.param == ScalarType::kBFloat16 ? "BF16" : "F16";
                         });

// Meta's q and k rows: head h's row 2i + p is HF's row p * head_dim / 2 + i.
TEST(HuggingFaceWeights, MetasInterleavedRotaryRowsBecomeHfsOrder) {
  // Heads of 8 rows: at 2 the interleaving moves no row, at 4 it is its own inverse.
  v1::ModelSpec model = Llama(/*tied=*/true);
  model.mutable_llama()->set_hidden_size(16);
  model.mutable_llama()->set_num_attention_heads(2);
  model.mutable_llama()->set_num_key_value_heads(1);
  const TensorMap weights = SeededWeights(model, 6);
  TensorMap meta;
  const auto layout = HuggingFaceTensors(model, v1::HuggingFaceCheckpoint::META, "f");
  ASSERT_TRUE(layout.ok()) << layout.status();
  for (const HuggingFaceTensor& t : *layout) {
    const HostTensor& hf = weights.at(t.param);
    std::vector<float> values(hf.f32(), hf.f32() + hf.numel());
    if (t.interleaved_heads > 0) {
      const int64_t cols = hf.shape[1], head_dim = hf.shape[0] / t.interleaved_heads;
      for (int64_t h = 0; h < t.interleaved_heads; ++h) {
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          for (int64_t p = 0; p < 2; ++p) {
            std::copy_n(hf.f32() + (h * head_dim + p * head_dim / 2 + i) * cols, cols,
                        values.data() + (h * head_dim + 2 * i + p) * cols);
          }
        }
      }
    }
    meta[t.key] = F32Tensor(hf.shape, values.data());
  }
  ASSERT_TRUE(meta.count("layers.1.feed_forward.w3.weight"));  // up_proj
  ASSERT_TRUE(meta.count("tok_embeddings.weight"));
  v1::HuggingFaceCheckpoint checkpoint = Write(Dir("meta"), model, meta);
  checkpoint.set_layout(v1::HuggingFaceCheckpoint::META);
  auto read = ReadHuggingFaceWeights(model, checkpoint);
  ASSERT_TRUE(read.ok()) << read.status();
  for (const auto& [name, tensor] : weights) EXPECT_EQ(read->at(name).bytes, tensor.bytes) << name;
  ExpectPartsMakeTheWhole(model, checkpoint, weights);
}

// The bytes this process has read so far (/proc/self/io's rchar: every read and pread).
int64_t BytesReadSoFar() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  ADD_FAILURE() << "/proc/self/io has no rchar";
  return 0;
}

// Wants nothing of any tensor, and counts the tensors it is given.
class NothingWanted : public ParameterReceiver {
 public:
  ElementRange Wanted(const std::string&, int64_t) const override { return {}; }
  absl::Status Take(const std::string&, const ParameterPiece& piece) override {
    EXPECT_TRUE(piece.range.empty());
    EXPECT_EQ(piece.values, nullptr);
    ++given;
    return absl::OkStatus();
  }
  int given = 0;
};

// A rank that wants a third of each tensor reads the stored rows that hold it, not the
// tensors: the bytes read (headers and config.json included) are well under half of what
// reading everything takes; one that wants nothing reads the headers only and is still
// given every tensor, empty.
TEST(HuggingFaceWeights, OnlyTheRowsThatHoldTheWantedElementsAreRead) {
  v1::ModelSpec model = Llama();
  model.mutable_llama()->set_vocab_size(1000);  // tensors far larger than the headers
  model.mutable_llama()->set_hidden_size(64);
  model.mutable_llama()->set_intermediate_size(128);
  const TensorMap weights = SeededWeights(model, 10);
  const v1::HuggingFaceCheckpoint checkpoint = Write(Dir("rows"), model, weights);
  std::map<std::string, std::vector<float>> everything, middle;
  int64_t before = BytesReadSoFar();
  PartReceiver whole(0, 1, &everything);
  ASSERT_TRUE(ReadHuggingFaceWeights(model, checkpoint, whole).ok());
  const int64_t whole_bytes = BytesReadSoFar() - before;
  before = BytesReadSoFar();
  PartReceiver middle_third(1, 3, &middle);
  ASSERT_TRUE(ReadHuggingFaceWeights(model, checkpoint, middle_third).ok());
  const int64_t third_bytes = BytesReadSoFar() - before;
  EXPECT_LT(third_bytes, whole_bytes / 2) << third_bytes << " of " << whole_bytes;
  for (const auto& [name, tensor] : weights) {
    const int64_t n = tensor.numel();
    EXPECT_EQ(middle[name], std::vector<float>(tensor.f32() + n / 3, tensor.f32() + 2 * n / 3))
        << name;
  }
  before = BytesReadSoFar();
  NothingWanted nothing;
  ASSERT_TRUE(ReadHuggingFaceWeights(model, checkpoint, nothing).ok());
  EXPECT_LT(BytesReadSoFar() - before, whole_bytes / 10);
  EXPECT_EQ(nothing.given, static_cast<int>(weights.size()));
}

TEST(HuggingFaceWeights, ACheckpointThatDoesNotFitIsRefusedNamingTheKey) {
  const v1::ModelSpec model = Llama();
  const TensorMap weights = SeededWeights(model, 7);
  struct Case {
    std::string what;
    std::function<void(TensorMap&, v1::ModelSpec&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing",
       [](TensorMap& w, v1::ModelSpec&) { w.erase("model.layers.1.mlp.up_proj.weight"); },
       "has no tensor 'model.layers.1.mlp.up_proj.weight'"},
      {"shape",
       [](TensorMap& w, v1::ModelSpec&) {
         w["model.norm.weight"] = F32Tensor({4}, std::vector<float>(4).data());
       },
       "tensor 'model.norm.weight' is [4], the model's model.norm.weight needs [8]"},
      {"unknown",
       [](TensorMap& w, v1::ModelSpec&) {
         w["model.layers.2.mlp.up_proj.weight"] = F32Tensor({1}, std::vector<float>(1).data());
       },
       "tensor 'model.layers.2.mlp.up_proj.weight' is not one of the model's"},
      {"config", [](TensorMap&, v1::ModelSpec& m) { m.mutable_llama()->set_rope_theta(500000); },
       "config.json has rope_theta 500000, model.llama.rope_theta is 10000"},
  };
  for (const Case& c : cases) {
    TensorMap changed = weights;
    v1::ModelSpec written = model;
    c.change(changed, written);
    const absl::Status status = Check(model, Write(Dir(c.what), written, changed));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_TRUE(absl::StrContains(status.message(), c.message)) << c.what << ": " << status;
    EXPECT_TRUE(absl::StartsWith(status.message(), "job.init.huggingface.dir: ")) << status;
  }
  // HF's own buffers are ignored; a folder without config.json is refused, one without
  // weights is NOT_FOUND.
  TensorMap with_buffer = weights;
  with_buffer["model.layers.0.self_attn.rotary_emb.inv_freq"] =
      F32Tensor({2}, std::vector<float>(2).data());
  EXPECT_TRUE(Check(model, Write(Dir("buffer"), model, with_buffer)).ok());
  v1::HuggingFaceCheckpoint empty;
  empty.set_dir(Dir("empty"));
  const absl::Status no_config = Check(model, empty);
  EXPECT_TRUE(absl::StrContains(no_config.message(), "has no config.json")) << no_config;
  std::ofstream(empty.dir() + "/config.json") << HuggingFaceConfigJson(model);
  EXPECT_EQ(Check(model, empty).code(), absl::StatusCode::kNotFound);
}

// A folder someone prepared to hurt the coordinator: a weights file that is a link (it
// could lead outside the allowed roots), a config.json whose keys hold nulls (HF's parser
// would take them; ours must not throw), a pipe in place of the index.
TEST(HuggingFaceWeights, AHostileFolderIsRefusedNotFollowedOrCrashedOn) {
  const v1::ModelSpec model = Llama();
  const TensorMap weights = SeededWeights(model, 8);
  const std::string linked = Dir("link");
  ASSERT_TRUE(WriteSafetensors(linked + "/real.safetensors", weights).ok());
  std::filesystem::create_symlink(linked + "/real.safetensors", linked + "/model.safetensors");
  std::ofstream(linked + "/config.json") << HuggingFaceConfigJson(model);
  v1::HuggingFaceCheckpoint checkpoint;
  checkpoint.set_dir(linked);
  absl::Status status = Check(model, checkpoint);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "is a symbolic link")) << status;

  const std::string nulls = Dir("nulls");
  checkpoint = Write(nulls, model, weights);
  std::ofstream(nulls + "/config.json")
      << R"({"num_attention_heads": null, "hidden_size": "64", "rope_scaling": {"rope_type": null}})";
  status = Check(model, checkpoint);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "config.json has")) << status;

  const std::string piped = Dir("pipe");
  std::ofstream(piped + "/config.json") << HuggingFaceConfigJson(model);
  ASSERT_EQ(mkfifo((piped + "/model.safetensors.index.json").c_str(), 0600), 0);
  checkpoint.set_dir(piped);
  status = Check(model, checkpoint);
  EXPECT_TRUE(absl::StrContains(status.message(), "is not a regular file")) << status;
}

// As from_pretrained: a model.safetensors is read before an index beside it.
TEST(HuggingFaceWeights, ASingleFileIsPreferredToAnIndex) {
  const v1::ModelSpec model = Llama();
  const std::string dir = Dir("both");
  const TensorMap weights = SeededWeights(model, 9);
  v1::HuggingFaceCheckpoint checkpoint = Write(dir, model, weights);
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map": {"model.norm.weight": "gone.safetensors"}})";
  const auto read = ReadHuggingFaceWeights(model, checkpoint);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), weights.size());  // the single file's, whole
  for (const auto& [name, tensor] : weights) EXPECT_EQ(read->at(name).bytes, tensor.bytes) << name;
}

// A shard the index names that is not there is NOT_FOUND naming it (what a host cannot
// read keeps its code too: not every error is the checkpoint's content); one whose
// header is not a safetensors header is INVALID_ARGUMENT.
TEST(HuggingFaceWeights, AShardFileMissingIsNotFoundAndADamagedOneInvalid) {
  const v1::ModelSpec model = Llama();
  const std::string dir = Dir("missing-shard");
  std::vector<TensorMap> shards(2);
  int k = 0;
  for (const auto& [name, tensor] : SeededWeights(model, 6)) shards[k++ % 2][name] = tensor;
  const v1::HuggingFaceCheckpoint checkpoint = WriteSharded(dir, model, shards);
  ASSERT_TRUE(Check(model, checkpoint).ok());
  const std::string second = dir + "/model-00002-of-00002.safetensors";
  std::ofstream(second, std::ios::trunc) << "not a safetensors file";
  absl::Status status = Check(model, checkpoint);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StartsWith(status.message(), "job.init.huggingface")) << status;
  std::filesystem::remove(second);
  status = Check(model, checkpoint);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "model-00002-of-00002.safetensors")) << status;
}

// A checkpoint of `model` whose config.json is the one Shardwise writes, edited by `edit`.
v1::HuggingFaceCheckpoint WithConfig(const std::string& name, const v1::ModelSpec& model,
                                     const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = Dir(name);
  v1::HuggingFaceCheckpoint checkpoint = Write(dir, model, SeededWeights(model, 3));
  nlohmann::json config = nlohmann::json::parse(HuggingFaceConfigJson(model));
  edit(config);
  std::ofstream(dir + "/config.json", std::ios::trunc) << config.dump(2);
  return checkpoint;
}

// transformers v5 writes RoPE into rope_parameters (rope_theta, rope_type and the
// scaling's keys), not at the top: read there, as v5 reads it, not taken as the defaults.
TEST(HuggingFaceWeights, AVersion5ConfigsRopeParametersAreRead) {
  v1::ModelSpec model = Llama();
  model.mutable_llama()->set_rope_theta(500000);
  v1::RopeScaling* scaling = model.mutable_llama()->mutable_rope_scaling();
  scaling->set_rope_type("llama3");
  scaling->set_factor(8);
  scaling->set_low_freq_factor(1);
  scaling->set_high_freq_factor(4);
  scaling->set_original_max_position_embeddings(8192);
  const auto v5 = [](nlohmann::json& config) {
    nlohmann::json rope = config["rope_scaling"];
    rope["rope_theta"] = config["rope_theta"];
    config["rope_parameters"] = rope;
    config.erase("rope_scaling");
    config.erase("rope_theta");
  };
  const v1::HuggingFaceCheckpoint checkpoint = WithConfig("rope-v5", model, v5);
  EXPECT_TRUE(Check(model, checkpoint).ok()) << Check(model, checkpoint);
  const absl::Status plain = Check(Llama(), checkpoint);  // theta 10000, no scaling
  EXPECT_EQ(plain.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(plain.message(),
                                "rope_parameters: config.json has rope_theta "
                                "500000"))
      << plain;
  // A RoPE per layer type (Gemma's) is no Llama's.
  const absl::Status per_layer =
      Check(model, WithConfig("rope-per-layer", model, [&](nlohmann::json& config) {
              v5(config);
              config["rope_parameters"] = {{"full_attention", config["rope_parameters"]}};
            }));
  EXPECT_TRUE(absl::StrContains(per_layer.message(), "a RoPE per layer type")) << per_layer;
  // transformers takes the original context as any number.
  EXPECT_TRUE(Check(model, WithConfig("rope-float-context", model,
                                      [](nlohmann::json& config) {
                                        config["rope_scaling"]["original_max_position_embeddings"] =
                                            8192.0;
                                      }))
                  .ok());
}

// hidden_act names transformers' activations: "swish" is the same nn.SiLU as "silu".
TEST(HuggingFaceWeights, HiddenActIsSiluByEitherName) {
  const v1::ModelSpec model = Llama();
  const auto act = [](const std::string& name) {
    return [name](nlohmann::json& config) { config["hidden_act"] = name; };
  };
  EXPECT_TRUE(Check(model, WithConfig("act-swish", model, act("swish"))).ok());
  const absl::Status gelu = Check(model, WithConfig("act-gelu", model, act("gelu")));
  EXPECT_EQ(gelu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(gelu.message(), "config.json has hidden_act 'gelu'")) << gelu;
}

// Mistral's config.json is read with MistralConfig's defaults: a sliding window of 4096
// where the key is left out (null: none); LlamaForCausalLM reads no sliding_window at all.
TEST(HuggingFaceWeights, MistralsSlidingWindowIsItsDefaultWhereLeftOut) {
  v1::ModelSpec model = Llama();
  model.mutable_llama()->set_max_position_embeddings(8192);
  const auto mistral = [](nlohmann::json& config) {
    config["model_type"] = "mistral";
    config.erase("sliding_window");
  };
  const absl::Status left_out = Check(model, WithConfig("mistral-default", model, mistral));
  EXPECT_TRUE(absl::StrContains(left_out.message(), "sliding_window 4096 (Mistral's default)"))
      << left_out;
  EXPECT_TRUE(Check(model, WithConfig("mistral-none", model,
                                      [&](nlohmann::json& config) {
                                        mistral(config);
                                        config["sliding_window"] = nullptr;
                                      }))
                  .ok());
  const absl::Status not_used =
      Check(model, WithConfig("mistral-qwen-key", model, [&](nlohmann::json& config) {
              mistral(config);
              config["use_sliding_window"] = false;
              config["sliding_window"] = 4096;
            }));
  EXPECT_TRUE(absl::StrContains(not_used.message(), "sliding_window 4096, less than")) << not_used;
  const absl::Status text =
      Check(model, WithConfig("mistral-text", model, [&](nlohmann::json& config) {
              mistral(config);
              config["sliding_window"] = "4";
            }));
  EXPECT_TRUE(absl::StrContains(text.message(), "config.json has sliding_window \"4\"")) << text;
  EXPECT_TRUE(Check(model, WithConfig("llama-window", model,
                                      [](nlohmann::json& config) { config["sliding_window"] = 4; }))
                  .ok());
}

}  // namespace
}  // namespace shardwise
