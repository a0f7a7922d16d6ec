#include "contracts/huggingface_layout.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/field_failure.h"
#include "common/json_depth.h"
#include "common/printable_text.h"
#include "common/status_macros.h"
#include "common/untrusted_file.h"
#include "contracts/model_description.h"
#include "contracts/safetensors_header.h"
#include "contracts/transformer_config.h"
#include "nlohmann/json.hpp"
#include "tokenizer/manifest.h"

namespace shardwise {
namespace {

using Json = nlohmann::json;
using Layout = v1::HuggingFaceCheckpoint::Layout;

absl::Status Invalid(const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// `read`, an error reading one of the checkpoint's files, as a failure of `field`: what
// this host may not read (PERMISSION_DENIED) or does not find (NOT_FOUND) keeps its code
// as well as what it could not read now.
absl::Status FileFailure(const std::string& field, const absl::Status& read) {
  return FieldFailure(field, read,
                      {absl::StatusCode::kUnavailable, absl::StatusCode::kPermissionDenied,
                       absl::StatusCode::kNotFound});
}

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool IsGpt2Conv1D(const std::string& name) {
  for (const char* leaf :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    if (absl::EndsWith(name, leaf)) return true;
  }
  return false;
}

// Meta's name of a Llama parameter (HF's name in, Meta's out).
std::string MetaName(const std::string& name) {
  static const auto* kLeaves = new std::vector<std::pair<std::string, std::string>>{
      {"self_attn.q_proj", "attention.wq"},    {"self_attn.k_proj", "attention.wk"},
      {"self_attn.v_proj", "attention.wv"},    {"self_attn.o_proj", "attention.wo"},
      {"mlp.gate_proj", "feed_forward.w1"},    {"mlp.up_proj", "feed_forward.w3"},
      {"mlp.down_proj", "feed_forward.w2"},    {"input_layernorm", "attention_norm"},
      {"post_attention_layernorm", "ffn_norm"}};
  if (name == "model.embed_tokens.weight") return "tok_embeddings.weight";
  if (name == "model.norm.weight") return "norm.weight";
  if (name == "lm_head.weight") return "output.weight";
  std::string meta = absl::StrReplaceAll(name, {{"model.layers.", "layers."}});
  for (const auto& [hf, original] : *kLeaves) {
    meta =
        absl::StrReplaceAll(meta, {{absl::StrCat(".", hf, "."), absl::StrCat(".", original, ".")}});
  }
  return meta;
}

absl::StatusOr<HuggingFaceTensor> LlamaTensor(const ParameterDesc& param,
                                              const v1::LlamaConfig& llama, Layout layout) {
  HuggingFaceTensor t{param.name, param.name, param.shape};
  if (layout != v1::HuggingFaceCheckpoint::META) return t;
  t.key = MetaName(param.name);
  if (absl::EndsWith(param.name, "self_attn.q_proj.weight")) {
    t.interleaved_heads = llama.num_attention_heads();
  } else if (absl::EndsWith(param.name, "self_attn.k_proj.weight")) {
    t.interleaved_heads = llama.num_key_value_heads();
  }
  return t;
}

// Keys HF's from_pretrained ignores for this model.
bool Ignored(const v1::ModelSpec& model, const std::string& key) {
  // The rotary buffers: HF's, and Meta's consolidated checkpoints' rope.freqs.
  if (absl::EndsWith(key, "rotary_emb.inv_freq") || key == "rope.freqs") return true;
  if (model.has_gpt()) {
    return absl::EndsWith(key, ".attn.bias") || absl::EndsWith(key, ".attn.masked_bias") ||
           key == "lm_head.weight";
  }
  return WithLlamaDefaults(model.llama()).tie_word_embeddings() &&
         (key == "lm_head.weight" || key == "output.weight");
}

// Whether `path` names something in the folder at all (no exception on a folder that
// cannot be searched: that reads as absent, and opening it says why).
bool Present(const std::string& path) {
  std::error_code error;
  return std::filesystem::symlink_status(path, error).type() !=
         std::filesystem::file_type::not_found;
}

// config.json is a few KB and the largest index (DeepSeek V3's, 91,000 tensors) 9 MB;
// this bounds what a hostile one can make the coordinator parse and hold.
constexpr uint64_t kMaxJsonBytes = uint64_t{16} << 20;
// Deeper than any config.json: each level of a parsed JSON value costs memory, and a file
// of nothing but '[' would otherwise take gigabytes.
constexpr int kMaxJsonDepth = 64;

// `path` names a file in the checkpoint's folder, whose path is read as `links` says.
absl::StatusOr<std::string> ReadText(const std::string& path, const std::string& field,
                                     Links links) {
  auto text = ReadUntrustedFile(path, kMaxJsonBytes, InsideFolder(links));
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(field, ": ", text.status().message(),
                                     absl::IsInvalidArgument(text.status())
                                         ? " (copy a Hugging Face cache's snapshot out first: "
                                           "links are not followed)"
                                         : ""));
  }
  return text;
}

absl::StatusOr<Json> ReadJson(const std::string& path, const std::string& field, Links links) {
  ASSIGN_OR_RETURN(const std::string text, ReadText(path, field, links));
  if (JsonNestingDepth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    return Invalid(field,
                   absl::StrCat("'", path, "' nests deeper than ", kMaxJsonDepth, " levels"));
  }
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return Invalid(field, absl::StrCat("'", path, "' is not a JSON object"));
  }
  return json;
}

// The shards model.safetensors.index.json names, by tensor; each a plain file name in the
// checkpoint's folder.
absl::StatusOr<std::map<std::string, std::string>> ShardOfTensor(const std::string& dir,
                                                                 const std::string& field,
                                                                 Links links) {
  const std::string path = dir + "/model.safetensors.index.json";
  ASSIGN_OR_RETURN(const Json index, ReadJson(path, field, links));
  const auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object()) {
    return Invalid(field, absl::StrCat("'", path, "' has no weight_map object"));
  }
  if (map->size() > kMaxSafetensorsEntries) {
    return Invalid(field,
                   absl::StrCat("'", path, "' maps ", map->size(), " tensors, more than the ",
                                kMaxSafetensorsEntries, " a checkpoint may hold"));
  }
  std::map<std::string, std::string> shards;
  for (const auto& [key, file] : map->items()) {
    const std::string name = file.is_string() ? file.get<std::string>() : "";
    if (name.empty() || absl::StrContains(name, "/") || name == "." || name == "..") {
      return Invalid(field, absl::StrCat("'", path, "' maps '", ShownValue(key),
                                         "' to a file that is not a name in its folder"));
    }
    shards[key] = absl::StrCat(dir, "/", name);
  }
  return shards;
}

// Every tensor of the checkpoint: its file and entry.
absl::StatusOr<std::map<std::string, std::pair<std::string, SafetensorsEntry>>> ReadIndex(
    const std::string& dir, const std::string& field, Links links) {
  std::map<std::string, std::pair<std::string, SafetensorsEntry>> tensors;
  std::map<std::string, std::string> shard_of;
  // As from_pretrained: a single model.safetensors first, else the sharded index.
  if (!Present(dir + "/model.safetensors")) {
    if (!Present(dir + "/model.safetensors.index.json")) {
      return absl::NotFoundError(absl::StrCat(
          field, ": '", dir, "' holds neither model.safetensors nor model.safetensors.index.json"));
    }
    ASSIGN_OR_RETURN(shard_of, ShardOfTensor(dir, field, links));
  }
  std::set<std::string> files;
  for (const auto& [key, file] : shard_of) files.insert(file);
  if (shard_of.empty()) files.insert(dir + "/model.safetensors");
  for (const std::string& file : files) {
    auto index = ReadSafetensorsIndex(file, InsideFolder(links));
    if (!index.ok()) return FileFailure(field, index.status());
    for (const auto& [name, entry] : index->tensors) {
      if (!shard_of.empty() && shard_of.count(name) && shard_of[name] != file) continue;
      tensors[name] = {file, entry};
    }
  }
  for (const auto& [key, file] : shard_of) {
    if (!tensors.count(key)) {
      return Invalid(field, absl::StrCat("the index names '", ShownValue(key), "' in '", file,
                                         "', which does not hold it"));
    }
  }
  return tensors;
}

// ---- config.json against the model ----

// config.json's `key` if it holds an integer, else `fallback` (for defaults that follow
// another key; a value of the wrong type is refused by ConfigCheck).
int64_t IntOr(const Json& json, const std::string& key, int64_t fallback) {
  const auto it = json.find(key);
  return it != json.end() && it->is_number_integer() && !it->is_number_unsigned()
             ? it->get<int64_t>()
         : it != json.end() && it->is_number_unsigned() &&
                 it->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
             ? static_cast<int64_t>(it->get<uint64_t>())
             : fallback;
}

// A value as config.json gives it, for messages.
std::string ShownJson(const Json& value) { return ShownValue(value.dump()); }

// config.json against the model's spec, key by key, as Hugging Face's config classes read
// it: a key left out (or null) takes the class's default; a key of the wrong type is
// refused, naming the value given (HF would fail later, or build another model).
class ConfigCheck {
 public:
  ConfigCheck(const Json& config, std::string field, std::string kind)
      : config_(config), field_(std::move(field)), kind_(std::move(kind)) {}

  // config.json's `key` (or `fallback` where it lacks one) against the spec's `ours`.
  void Int(const std::string& key, int64_t fallback, const std::string& our_field, int64_t ours) {
    const Json* value = Given(key, "an integer", [](const Json& v) {
      return v.is_number_integer() &&
             (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX));
    });
    if (!status_.ok()) return;
    const int64_t theirs = value != nullptr ? IntOr(config_, key, fallback) : fallback;
    if (theirs != ours) Mismatch(key, absl::StrCat(theirs), our_field, absl::StrCat(ours));
  }
  void Real(const std::string& key, double fallback, const std::string& our_field, double ours) {
    const Json* value = Given(key, "a number", [](const Json& v) { return v.is_number(); });
    if (!status_.ok()) return;
    const double theirs = value != nullptr ? value->get<double>() : fallback;
    if (std::abs(theirs - ours) > 1e-12 * std::max(std::abs(theirs), std::abs(ours))) {
      Mismatch(key, ShownNumber(theirs), our_field, ShownNumber(ours));
    }
  }
  void Bool(const std::string& key, bool fallback, const std::string& our_field, bool ours) {
    const Json* value = Given(key, "true or false", [](const Json& v) { return v.is_boolean(); });
    if (!status_.ok()) return;
    const bool theirs = value != nullptr ? value->get<bool>() : fallback;
    if (theirs != ours) {
      Mismatch(key, theirs ? "true" : "false", our_field, ours ? "true" : "false");
    }
  }
  std::string String(const std::string& key, const std::string& fallback) {
    const Json* value = Given(key, "a string", [](const Json& v) { return v.is_string(); });
    return value != nullptr ? value->get<std::string>() : fallback;
  }
  // The object at `key`, or nullptr where it is absent or null.
  const Json* Object(const std::string& key) {
    return Given(key, "an object", [](const Json& v) { return v.is_object(); });
  }
  void Fail(const std::string& message) {
    if (status_.ok()) status_ = Invalid(field_, message);
  }
  const Json& config() const { return config_; }
  absl::Status status() const { return status_; }

 private:
  // The value at `key` when it has the type `is` checks; nullptr when it is absent or
  // null; a failure naming the value when it is of another type.
  template <typename Check>
  const Json* Given(const std::string& key, const char* type, Check is) {
    const auto it = config_.find(key);
    if (it == config_.end() || it->is_null()) return nullptr;
    if (is(*it)) return &*it;
    Fail(absl::StrCat("config.json has ", key, " ", ShownJson(*it), ", not ", type));
    return nullptr;
  }
  void Mismatch(const std::string& key, const std::string& theirs, const std::string& our_field,
                const std::string& ours) {
    Fail(absl::StrCat("config.json has ", key, " ", theirs, ", ", kind_, ".", our_field, " is ",
                      ours, ": the checkpoint is of another model"));
  }

  const Json& config_;
  const std::string field_, kind_;
  absl::Status status_;
};

// The RoPE scaling `given` (config.json's object `name`, or none) against the spec's.
void CheckRopeScaling(const v1::LlamaConfig& llama, const Json* given, const std::string& name,
                      ConfigCheck& check) {
  std::string type;
  if (given != nullptr) {
    ConfigCheck scaling_type(*given, "", "");
    type = scaling_type.String("rope_type", scaling_type.String("type", ""));
    if (!scaling_type.status().ok())
      return check.Fail(absl::StrCat(name, scaling_type.status().message()));
  }
  if (type == "default") type.clear();
  const std::string ours = llama.has_rope_scaling() ? llama.rope_scaling().rope_type() : "";
  if (type != ours) {
    return check.Fail(absl::StrCat("config.json has ", name, " type '", ShownValue(type),
                                   "', model.llama.rope_scaling is '", ShownValue(ours), "'"));
  }
  if (type.empty()) return;
  ConfigCheck scaling(*given, "", "model.llama");
  const v1::RopeScaling& s = llama.rope_scaling();
  scaling.Real("factor", 0, "rope_scaling.factor", s.factor());
  scaling.Real("low_freq_factor", 0, "rope_scaling.low_freq_factor", s.low_freq_factor());
  scaling.Real("high_freq_factor", 0, "rope_scaling.high_freq_factor", s.high_freq_factor());
  // A number, not only an integer: transformers divides it by the frequency factors as it
  // comes (8192.0 works as 8192 there).
  scaling.Real("original_max_position_embeddings", 0,
               "rope_scaling.original_max_position_embeddings",
               static_cast<double>(s.original_max_position_embeddings()));
  if (!scaling.status().ok()) check.Fail(absl::StrCat(name, scaling.status().message()));
}

// RoPE where config.json keeps it: transformers v4 writes rope_theta at the top and the
// scaling in rope_scaling; v5 writes both into rope_parameters ({"rope_theta", "rope_type",
// ...}). As v5 reads a file: a rope_scaling that is not empty, else rope_parameters; the
// theta from that object, else from the top, else 10000.
void CheckRope(const v1::LlamaConfig& llama, ConfigCheck& check) {
  const Json* scaling = check.Object("rope_scaling");
  const Json* parameters = check.Object("rope_parameters");
  if (!check.status().ok()) return;
  const bool v4 = scaling != nullptr && !scaling->empty();
  const Json* rope = v4 ? scaling : parameters;
  const std::string name = v4 ? "rope_scaling" : "rope_parameters";
  if (rope != nullptr) {
    for (const auto& [key, value] : rope->items()) {
      if (value.is_object()) {  // Gemma-style: a RoPE per layer type
        return check.Fail(absl::StrCat("config.json has ", name, ".", ShownValue(key),
                                       ", a RoPE per layer type: the llama kind has one"));
      }
    }
  }
  const auto theta = rope != nullptr ? rope->find("rope_theta") : check.config().end();
  if (rope != nullptr && theta != rope->end() && !theta->is_null()) {
    ConfigCheck inner(*rope, "", "model.llama");
    inner.Real("rope_theta", 10000, "rope_theta", llama.rope_theta());
    if (!inner.status().ok()) return check.Fail(absl::StrCat(name, inner.status().message()));
  } else {
    check.Real("rope_theta", 10000, "rope_theta", llama.rope_theta());
  }
  CheckRopeScaling(llama, rope, name, check);
}

// The model_type a config.json of this kind may name (a key left out names none).
void CheckModelType(ConfigCheck& check, std::initializer_list<const char*> accepted,
                    const std::string& kind) {
  const std::string type = check.String("model_type", "");
  if (type.empty()) return;
  for (const char* name : accepted) {
    if (type == name) return;
  }
  check.Fail(absl::StrCat("config.json has model_type '", ShownValue(type), "', not a ", kind,
                          "'s: the checkpoint is of another model"));
}

// HF's defaults where config.json leaves a key out, by its model_type: LlamaConfig's, or
// MistralConfig's, which are Llama's but for these and a sliding window (4096 unless the
// file says null).
struct LlamaKindDefaults {
  int64_t intermediate_size = 11008;
  int64_t num_key_value_heads = -1;  // -1: num_attention_heads
  int64_t max_position_embeddings = 2048;
  std::optional<int64_t> sliding_window;
};

LlamaKindDefaults DefaultsOf(const std::string& model_type) {
  if (model_type != "mistral") return LlamaKindDefaults();
  return LlamaKindDefaults{14336, 8, int64_t{4096} * 32, 4096};
}

// Mistral's sliding window, which the llama kind does not compute: one that covers the
// whole context changes nothing. LlamaForCausalLM reads no sliding_window (nor does
// Mistral read use_sliding_window, Qwen2's key).
void CheckSlidingWindow(const v1::LlamaConfig& llama, const LlamaKindDefaults& defaults,
                        ConfigCheck& check) {
  if (!defaults.sliding_window.has_value()) return;
  const auto window = check.config().find("sliding_window");
  if (window != check.config().end() && window->is_null()) return;  // none
  const bool given = window != check.config().end();
  if ((given && !window->is_number_integer()) ||
      (given ? IntOr(check.config(), "sliding_window", 0) : *defaults.sliding_window) <
          llama.max_position_embeddings()) {
    check.Fail(absl::StrCat(
        "config.json has sliding_window ",
        given ? ShownJson(*window) : absl::StrCat(*defaults.sliding_window, " (Mistral's default)"),
        ", less than the whole context (model.llama.max_position_embeddings ",
        llama.max_position_embeddings(), "): the llama kind attends to the whole context"));
  }
}

// HF LlamaConfig's defaults where config.json leaves a key out. Not read: pad_token_id (HF
// keeps that embedding row's gradient at zero; the llama kind packs its sequences, never
// pads them, and trains every row: docs/job-spec.md).
absl::Status CheckLlamaConfigJson(const v1::LlamaConfig& given, const Json& json,
                                  const std::string& field) {
  const v1::LlamaConfig llama = WithLlamaDefaults(given);
  ConfigCheck check(json, field, "model.llama");
  CheckModelType(check, {"llama", "mistral"}, "Llama");
  const LlamaKindDefaults defaults = DefaultsOf(check.String("model_type", "llama"));
  check.Int("vocab_size", 32000, "vocab_size", llama.vocab_size());
  check.Int("hidden_size", 4096, "hidden_size", llama.hidden_size());
  check.Int("intermediate_size", defaults.intermediate_size, "intermediate_size",
            llama.intermediate_size());
  check.Int("num_hidden_layers", 32, "num_hidden_layers", llama.num_hidden_layers());
  const int64_t heads = IntOr(json, "num_attention_heads", 32);
  check.Int("num_attention_heads", 32, "num_attention_heads", llama.num_attention_heads());
  check.Int("num_key_value_heads",
            defaults.num_key_value_heads > 0 ? defaults.num_key_value_heads : heads,
            "num_key_value_heads", llama.num_key_value_heads());
  check.Int("head_dim", IntOr(json, "hidden_size", 4096) / std::max<int64_t>(1, heads), "head_dim",
            llama.head_dim());
  check.Int("max_position_embeddings", defaults.max_position_embeddings, "max_position_embeddings",
            llama.max_position_embeddings());
  check.Real("rms_norm_eps", 1e-6, "rms_norm_eps", llama.rms_norm_eps());
  check.Bool("attention_bias", false, "attention_bias", llama.attention_bias());
  check.Bool("mlp_bias", false, "mlp_bias", llama.mlp_bias());
  check.Bool("tie_word_embeddings", false, "tie_word_embeddings", llama.tie_word_embeddings());
  // transformers' ACT2FN maps "swish" to the same nn.SiLU.
  const std::string act = check.String("hidden_act", "silu");
  if (act != "silu" && act != "swish") {
    check.Fail(absl::StrCat("config.json has hidden_act '", ShownValue(act),
                            "'; the llama kind computes silu (\"silu\" or \"swish\")"));
  }
  CheckSlidingWindow(llama, defaults, check);
  CheckRope(llama, check);
  return check.status();
}

// GPT2Config's defaults where config.json leaves a key out.
absl::Status CheckGpt2ConfigJson(const v1::GptConfig& gpt, const Json& json,
                                 const std::string& field) {
  ConfigCheck check(json, field, "model.gpt");
  check.Int("vocab_size", 50257, "vocab_size", gpt.vocab_size());
  check.Int("n_positions", 1024, "block_size", gpt.block_size());
  check.Int("n_embd", 768, "n_embd", gpt.n_embd());
  check.Int("n_layer", 12, "n_layer", gpt.n_layer());
  check.Int("n_head", 12, "n_head", gpt.n_head());
  check.Int("n_inner", 4 * gpt.n_embd(), "n_embd * 4", 4 * gpt.n_embd());
  check.Real("layer_norm_epsilon", 1e-5, "LayerNorm eps", 1e-5);
  check.Bool("tie_word_embeddings", true, "lm_head tied to wte", true);
  const std::string act = check.String("activation_function", "gelu_new");
  const bool tanh = gpt.activation() == v1::GELU_TANH;
  CheckModelType(check, {"gpt2"}, "GPT-2");
  if (act != (tanh ? "gelu_new" : "gelu")) {
    check.Fail(absl::StrCat("config.json has activation_function '", ShownValue(act),
                            "', model.gpt.activation is ", v1::Activation_Name(gpt.activation()),
                            " (\"gelu\" is GELU, \"gelu_new\" GELU_TANH)"));
  }
  return check.status();
}

absl::Status CheckConfigJson(const v1::ModelSpec& model, const std::string& dir,
                             const std::string& field, Links links) {
  auto json = ReadJson(dir + "/config.json", field, links);
  if (absl::IsNotFound(json.status())) {
    return Invalid(field, absl::StrCat("'", dir, "' has no config.json"));
  }
  if (!json.ok()) return json.status();
  return model.has_llama() ? CheckLlamaConfigJson(model.llama(), *json, field)
                           : CheckGpt2ConfigJson(model.gpt(), *json, field);
}

// The checkpoint's entry for `want`: its key, or for GPT-2 the key without
// "transformer.".
const std::pair<std::string, SafetensorsEntry>* Find(
    const std::map<std::string, std::pair<std::string, SafetensorsEntry>>& index,
    HuggingFaceTensor& want) {
  auto it = index.find(want.key);
  if (it == index.end() && absl::StartsWith(want.key, "transformer.")) {
    it = index.find(want.key.substr(std::string("transformer.").size()));
  }
  if (it == index.end()) return nullptr;
  want.key = it->first;
  return &it->second;
}

}  // namespace

absl::StatusOr<std::vector<HuggingFaceTensor>> HuggingFaceTensors(
    const v1::ModelSpec& model, v1::HuggingFaceCheckpoint::Layout layout,
    const std::string& field) {
  if (!IsTransformer(model)) return Invalid(field, "needs model.gpt or model.llama");
  if (model.has_gpt() && layout == v1::HuggingFaceCheckpoint::META) {
    return Invalid(field, "the META layout is a Llama's; model.gpt takes HUGGING_FACE");
  }
  if (model.has_gpt() && model.gpt().has_bias() && !model.gpt().bias()) {
    return Invalid(field, "GPT2LMHeadModel has biases everywhere: model.gpt.bias must be true");
  }
  const v1::LlamaConfig llama = WithLlamaDefaults(model.llama());
  if (layout == v1::HuggingFaceCheckpoint::META && (llama.attention_bias() || llama.mlp_bias())) {
    return Invalid(field,
                   "Meta's layout has no biases: model.llama.attention_bias and mlp_bias "
                   "must be false");
  }
  ASSIGN_OR_RETURN(const ModelDescription description, DescribeModel(model));
  std::vector<HuggingFaceTensor> tensors;
  for (const ParameterDesc& param : description.params) {
    if (model.has_llama()) {
      ASSIGN_OR_RETURN(HuggingFaceTensor t, LlamaTensor(param, llama, layout));
      tensors.push_back(std::move(t));
      continue;
    }
    HuggingFaceTensor t{param.name, param.name, param.shape};
    if (IsGpt2Conv1D(param.name)) {
      t.transposed = true;
      t.shape = {param.shape[1], param.shape[0]};
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

absl::StatusOr<std::vector<LocatedTensor>> LocateHuggingFaceTensors(
    const v1::ModelSpec& model, const v1::HuggingFaceCheckpoint& checkpoint,
    const std::string& field, Links links) {
  const std::string dir = absl::StrCat(field, ".dir");
  ASSIGN_OR_RETURN(std::vector<HuggingFaceTensor> wanted,
                   HuggingFaceTensors(model, checkpoint.layout(), field));
  if (checkpoint.layout() != v1::HuggingFaceCheckpoint::META) {
    RETURN_IF_ERROR(CheckConfigJson(model, checkpoint.dir(), dir, links));
  }
  ASSIGN_OR_RETURN(const auto index, ReadIndex(checkpoint.dir(), dir, links));
  std::vector<LocatedTensor> located;
  std::set<std::string> used;
  for (HuggingFaceTensor& want : wanted) {
    const auto* found = Find(index, want);
    if (found == nullptr) {
      return Invalid(dir, absl::StrCat("'", checkpoint.dir(), "' has no tensor '", want.key, "' (",
                                       want.param, ")"));
    }
    const SafetensorsEntry& entry = found->second;
    if (entry.dtype != "F32" && entry.dtype != "BF16" && entry.dtype != "F16") {
      return Invalid(dir, absl::StrCat("tensor '", want.key, "' is ", entry.dtype,
                                       "; weights are F32, BF16 or F16"));
    }
    if (entry.shape != want.shape) {
      return Invalid(dir, absl::StrCat("tensor '", want.key, "' is ", Shape(entry.shape),
                                       ", the model's ", want.param, " needs ", Shape(want.shape)));
    }
    used.insert(want.key);
    located.push_back({want, found->first, entry});
  }
  for (const auto& [key, unused] : index) {
    if (!used.count(key) && !Ignored(model, key)) {
      return Invalid(dir, absl::StrCat("tensor '", key, "' is not one of the model's (",
                                       ModelField(model), " has no such parameter)"));
    }
  }
  return located;
}

namespace {

Json IdOrNull(std::optional<int32_t> id) { return id.has_value() ? Json(*id) : Json(nullptr); }

}  // namespace

std::string HuggingFaceGenerationConfigJson(const SpecialTokenIds& ids) {
  Json json = Json::object();
  if (ids.bos.has_value()) json["bos_token_id"] = *ids.bos;
  if (ids.eos.has_value()) json["eos_token_id"] = *ids.eos;
  return json.dump(2) + "\n";
}

std::string HuggingFaceConfigJson(const v1::ModelSpec& model, const SpecialTokenIds& ids) {
  Json json;
  if (model.has_gpt()) {
    const v1::GptConfig& gpt = model.gpt();
    json = {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", gpt.vocab_size()},
            {"n_positions", gpt.block_size()},
            {"n_embd", gpt.n_embd()},
            {"n_layer", gpt.n_layer()},
            {"n_head", gpt.n_head()},
            {"n_inner", nullptr},
            {"activation_function", gpt.activation() == v1::GELU_TANH ? "gelu_new" : "gelu"},
            {"layer_norm_epsilon", 1e-5},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"tie_word_embeddings", true},
            {"bos_token_id", IdOrNull(ids.bos)},
            {"eos_token_id", IdOrNull(ids.eos)},
            {"torch_dtype", "float32"}};
    return json.dump(2) + "\n";
  }
  const v1::LlamaConfig llama = WithLlamaDefaults(model.llama());
  Json scaling = nullptr;
  if (llama.has_rope_scaling()) {
    const v1::RopeScaling& s = llama.rope_scaling();
    scaling = {{"rope_type", s.rope_type()},
               {"factor", s.factor()},
               {"low_freq_factor", s.low_freq_factor()},
               {"high_freq_factor", s.high_freq_factor()},
               {"original_max_position_embeddings", s.original_max_position_embeddings()}};
  }
  json = {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", llama.vocab_size()},
          {"hidden_size", llama.hidden_size()},
          {"intermediate_size", llama.intermediate_size()},
          {"num_hidden_layers", llama.num_hidden_layers()},
          {"num_attention_heads", llama.num_attention_heads()},
          {"num_key_value_heads", llama.num_key_value_heads()},
          {"head_dim", llama.head_dim()},
          {"max_position_embeddings", llama.max_position_embeddings()},
          {"rms_norm_eps", llama.rms_norm_eps()},
          {"rope_theta", llama.rope_theta()},
          {"rope_scaling", scaling},
          {"attention_bias", llama.attention_bias()},
          {"attention_dropout", 0.0},
          {"mlp_bias", llama.mlp_bias()},
          {"hidden_act", "silu"},
          {"initializer_range", llama.initializer_range()},
          {"tie_word_embeddings", llama.tie_word_embeddings()},
          {"pretraining_tp", 1},
          {"bos_token_id", IdOrNull(ids.bos)},
          {"eos_token_id", IdOrNull(ids.eos)},
          {"torch_dtype", "float32"}};
  return json.dump(2) + "\n";
}

std::vector<std::string> HuggingFaceExportNames(const v1::JobSpec& spec) {
  std::vector<std::string> names = {"model.safetensors", "config.json",
                                    "model.safetensors.index.json"};
  if (spec.data().has_tokens() && !spec.data().tokens().tokenizer().empty()) {
    names.push_back("generation_config.json");
    names.insert(names.end(), std::begin(tokenizer::kHuggingFaceTokenizerNames),
                 std::end(tokenizer::kHuggingFaceTokenizerNames));
  }
  return names;
}

}  // namespace shardwise
