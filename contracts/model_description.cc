#include "contracts/model_description.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/printable_text.h"
#include "common/status_macros.h"
#include "contracts/transformer_config.h"

namespace shardwise {
namespace {

absl::Status Invalid(const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("job.", field, ": ", message));
}

// Builds a description module by module; parameter numels are checked for overflow as
// they are added.
class Builder {
 public:
  int AddModule(std::string name, ModuleKind kind, int index) {
    description_.modules.push_back({std::move(name), kind, index});
    return static_cast<int>(description_.modules.size()) - 1;
  }

  // Registers `module`'s parameter `leaf` ("weight"), named "<module name>.<leaf>".
  int AddParameter(int module, const std::string& leaf, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t d : shape) {
      if (d <= 0 || __builtin_mul_overflow(numel, d, &numel)) overflow_ = true;
    }
    ParameterDesc param;
    param.name = absl::StrCat(description_.modules[module].name, ".", leaf);
    param.shape = std::move(shape);
    param.module = module;
    description_.params.push_back(std::move(param));
    return static_cast<int>(description_.params.size()) - 1;
  }

  void AddStage(int module, std::vector<int> params, bool checkpointable) {
    description_.stages.push_back({module, std::move(params), checkpointable});
  }

  absl::StatusOr<ModelDescription> Finish(const std::string& field) {
    int64_t total = 0;
    for (const ParameterDesc& p : description_.params) {
      if (__builtin_add_overflow(total, p.numel(), &total)) overflow_ = true;
    }
    if (overflow_) return Invalid(field, "its parameter count does not fit in 64 bits");
    return std::move(description_);
  }

 private:
  ModelDescription description_;
  bool overflow_ = false;
};

absl::StatusOr<ModelDescription> DescribeMlp(const v1::ModelSpec& model) {
  const auto& widths = model.layer_widths();
  if (widths.size() < 2) {
    return Invalid("model.layer_widths",
                   absl::StrCat("needs at least two widths (input and output), got [",
                                absl::StrJoin(widths, ", "), "]"));
  }
  for (int i = 0; i < widths.size(); ++i) {
    if (widths[i] <= 0) {
      return Invalid(absl::StrCat("model.layer_widths[", i, "]"),
                     absl::StrCat("must be positive, got ", widths[i]));
    }
  }
  const bool bias = !model.has_bias() || model.bias();
  Builder builder;
  for (int l = 0; l + 1 < widths.size(); ++l) {
    // Linear l is module 2l of the nn.Sequential (activations sit between them).
    const int module = builder.AddModule(absl::StrCat(2 * l), ModuleKind::kLinearLayer, l);
    std::vector<int> params = {builder.AddParameter(module, "weight", {widths[l + 1], widths[l]})};
    if (bias) params.push_back(builder.AddParameter(module, "bias", {widths[l + 1]}));
    builder.AddStage(module, std::move(params), /*checkpointable=*/true);
  }
  return builder.Finish("model.layer_widths");
}

absl::Status CheckGptConfig(const v1::ModelSpec& model) {
  if (!model.layer_widths().empty() || model.activation() != v1::ACTIVATION_UNSPECIFIED ||
      model.has_bias() || model.has_llama()) {
    return Invalid("model",
                   "sets model.gpt and other kinds' fields (llama, layer_widths, activation, "
                   "bias); a model is one kind");
  }
  const v1::GptConfig& gpt = model.gpt();
  for (const auto& [field, value] :
       {std::make_pair("vocab_size", gpt.vocab_size()),
        std::make_pair("block_size", gpt.block_size()),
        std::make_pair("n_layer", int64_t{gpt.n_layer()}),
        std::make_pair("n_head", int64_t{gpt.n_head()}), std::make_pair("n_embd", gpt.n_embd())}) {
    if (value <= 0) {
      return Invalid(absl::StrCat("model.gpt.", field),
                     absl::StrCat("must be positive, got ", value));
    }
  }
  if (gpt.n_embd() % gpt.n_head() != 0) {
    return Invalid("model.gpt.n_embd", absl::StrCat(gpt.n_embd(),
                                                    " is not divisible by "
                                                    "model.gpt.n_head ",
                                                    gpt.n_head()));
  }
  if (gpt.activation() != v1::ACTIVATION_UNSPECIFIED && gpt.activation() != v1::GELU &&
      gpt.activation() != v1::GELU_TANH) {
    return Invalid("model.gpt.activation", absl::StrCat("must be GELU or GELU_TANH, got ",
                                                        v1::Activation_IsValid(gpt.activation())
                                                            ? v1::Activation_Name(gpt.activation())
                                                            : absl::StrCat(gpt.activation())));
  }
  return absl::OkStatus();
}

// nanoGPT's parameters in named_parameters() order; lm_head.weight is wte's.
absl::StatusOr<ModelDescription> DescribeGpt(const v1::ModelSpec& model) {
  if (absl::Status s = CheckGptConfig(model); !s.ok()) return s;
  const v1::GptConfig& gpt = model.gpt();
  const bool bias = !gpt.has_bias() || gpt.bias();
  const int64_t c = gpt.n_embd();
  Builder builder;
  const int wte = builder.AddModule("transformer.wte", ModuleKind::kTokenEmbedding, 0);
  const int wte_weight = builder.AddParameter(wte, "weight", {gpt.vocab_size(), c});
  builder.AddStage(wte, {wte_weight}, false);
  const int wpe = builder.AddModule("transformer.wpe", ModuleKind::kPositionEmbedding, 0);
  builder.AddStage(wpe, {builder.AddParameter(wpe, "weight", {gpt.block_size(), c})}, false);
  for (int n = 0; n < gpt.n_layer(); ++n) {
    const int block = builder.AddModule(absl::StrCat("transformer.h.", n), ModuleKind::kBlock, n);
    std::vector<int> params;
    auto add = [&](const std::string& leaf, std::vector<int64_t> shape, bool is_bias) {
      if (!is_bias || bias) params.push_back(builder.AddParameter(block, leaf, std::move(shape)));
    };
    add("ln_1.weight", {c}, false);
    add("ln_1.bias", {c}, true);
    add("attn.c_attn.weight", {3 * c, c}, false);
    add("attn.c_attn.bias", {3 * c}, true);
    add("attn.c_proj.weight", {c, c}, false);
    add("attn.c_proj.bias", {c}, true);
    add("ln_2.weight", {c}, false);
    add("ln_2.bias", {c}, true);
    add("mlp.c_fc.weight", {4 * c, c}, false);
    add("mlp.c_fc.bias", {4 * c}, true);
    add("mlp.c_proj.weight", {c, 4 * c}, false);
    add("mlp.c_proj.bias", {c}, true);
    builder.AddStage(block, std::move(params), /*checkpointable=*/true);
  }
  const int ln_f = builder.AddModule("transformer.ln_f", ModuleKind::kFinalNorm, 0);
  std::vector<int> ln_f_params = {builder.AddParameter(ln_f, "weight", {c})};
  if (bias) ln_f_params.push_back(builder.AddParameter(ln_f, "bias", {c}));
  builder.AddStage(ln_f, std::move(ln_f_params), false);
  const int head = builder.AddModule("lm_head", ModuleKind::kLmHead, 0);
  builder.AddStage(head, {wte_weight}, false);
  return builder.Finish("model.gpt");
}

absl::Status CheckPositive(const std::string& field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be positive, got ", value));
}

// The Llama's sizes and options, defaults filled in (the sizes' limits are validation's).
absl::Status CheckLlamaSizes(const v1::LlamaConfig& llama) {
  for (const auto& [field, value] :
       {std::make_pair("vocab_size", llama.vocab_size()),
        std::make_pair("hidden_size", llama.hidden_size()),
        std::make_pair("intermediate_size", llama.intermediate_size()),
        std::make_pair("num_hidden_layers", int64_t{llama.num_hidden_layers()}),
        std::make_pair("num_attention_heads", int64_t{llama.num_attention_heads()}),
        std::make_pair("num_key_value_heads", int64_t{llama.num_key_value_heads()}),
        std::make_pair("head_dim", llama.head_dim()),
        std::make_pair("max_position_embeddings", llama.max_position_embeddings()),
        std::make_pair("block_size", llama.block_size())}) {
    RETURN_IF_ERROR(CheckPositive(absl::StrCat("model.llama.", field), value));
  }
  if (llama.num_attention_heads() % llama.num_key_value_heads() != 0) {
    return Invalid("model.llama.num_key_value_heads",
                   absl::StrCat(llama.num_key_value_heads(),
                                " does not divide model.llama.num_attention_heads ",
                                llama.num_attention_heads()));
  }
  if (llama.head_dim() % 2 != 0) {
    return Invalid(
        "model.llama.head_dim",
        absl::StrCat("must be even (rotary embeddings rotate pairs), got ", llama.head_dim()));
  }
  if (llama.block_size() > llama.max_position_embeddings()) {
    return Invalid("model.llama.block_size",
                   absl::StrCat(llama.block_size(), " exceeds model.llama.max_position_embeddings ",
                                llama.max_position_embeddings()));
  }
  return absl::OkStatus();
}

absl::Status CheckRopeScaling(const v1::LlamaConfig& llama) {
  if (!llama.has_rope_scaling()) return absl::OkStatus();
  const v1::RopeScaling& scaling = llama.rope_scaling();
  if (scaling.rope_type().empty() && scaling.type().empty()) {
    return Invalid("model.llama.rope_scaling.rope_type",
                   "none given (\"llama3\", or \"default\" for no scaling; without a type the "
                   "block would be dropped, and transformers cannot build the model from it)");
  }
  if (scaling.rope_type() != "llama3") {
    return Invalid(
        "model.llama.rope_scaling.rope_type",
        absl::StrCat("'", ShownValue(scaling.rope_type()), "' is not taken (\"llama3\" or none)"));
  }
  if (!(scaling.factor() > 0) || !(scaling.low_freq_factor() > 0) ||
      !(scaling.high_freq_factor() > scaling.low_freq_factor()) ||
      !std::isfinite(scaling.factor()) || !std::isfinite(scaling.high_freq_factor()) ||
      scaling.original_max_position_embeddings() <= 0) {
    return Invalid(
        "model.llama.rope_scaling",
        absl::StrCat("llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor, "
                     "all finite, and original_max_position_embeddings > 0, got factor ",
                     ShownNumber(scaling.factor()), ", low_freq_factor ",
                     ShownNumber(scaling.low_freq_factor()), ", high_freq_factor ",
                     ShownNumber(scaling.high_freq_factor()), ", original_max_position_embeddings ",
                     scaling.original_max_position_embeddings()));
  }
  return absl::OkStatus();
}

absl::Status CheckLlamaConfig(const v1::ModelSpec& model) {
  if (!model.layer_widths().empty() || model.activation() != v1::ACTIVATION_UNSPECIFIED ||
      model.has_bias() || model.has_gpt()) {
    return Invalid("model",
                   "sets model.llama and other kinds' fields (gpt, layer_widths, activation, "
                   "bias); a model is one kind");
  }
  const v1::LlamaConfig llama = WithLlamaDefaults(model.llama());
  RETURN_IF_ERROR(CheckLlamaSizes(llama));
  if (llama.hidden_act() != "silu") {
    return Invalid("model.llama.hidden_act",
                   absl::StrCat("'", ShownValue(llama.hidden_act()), "' is not taken (\"silu\")"));
  }
  // Finite too: an infinite epsilon zeroes every norm, an infinite theta every rotation,
  // an infinite initializer range every weight.
  for (const auto& [field, value, zero_taken] :
       {std::make_tuple("rms_norm_eps", llama.rms_norm_eps(), false),
        std::make_tuple("rope_theta", llama.rope_theta(), false),
        std::make_tuple("initializer_range", llama.initializer_range(), true)}) {
    if (!std::isfinite(value) || value < 0 || (value == 0 && !zero_taken)) {
      return Invalid(absl::StrCat("model.llama.", field),
                     absl::StrCat("must be ", zero_taken ? ">= 0" : "> 0", " and finite, got ",
                                  ShownNumber(value)));
    }
  }
  return CheckRopeScaling(llama);
}

// One Llama decoder layer's parameters in HF's registration order (self_attn, mlp,
// input_layernorm, post_attention_layernorm).
std::vector<int> AddLlamaLayer(Builder& builder, int layer, const v1::LlamaConfig& llama) {
  const int64_t c = llama.hidden_size(), q = llama.num_attention_heads() * llama.head_dim();
  const int64_t kv = llama.num_key_value_heads() * llama.head_dim(), f = llama.intermediate_size();
  std::vector<int> params;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, bool bias) {
    params.push_back(builder.AddParameter(layer, name + ".weight", {out, in}));
    if (bias) params.push_back(builder.AddParameter(layer, name + ".bias", {out}));
  };
  linear("self_attn.q_proj", c, q, llama.attention_bias());
  linear("self_attn.k_proj", c, kv, llama.attention_bias());
  linear("self_attn.v_proj", c, kv, llama.attention_bias());
  linear("self_attn.o_proj", q, c, llama.attention_bias());
  linear("mlp.gate_proj", c, f, llama.mlp_bias());
  linear("mlp.up_proj", c, f, llama.mlp_bias());
  linear("mlp.down_proj", f, c, llama.mlp_bias());
  params.push_back(builder.AddParameter(layer, "input_layernorm.weight", {c}));
  params.push_back(builder.AddParameter(layer, "post_attention_layernorm.weight", {c}));
  return params;
}

// HF LlamaForCausalLM's parameters in named_parameters() order; a tied lm_head.weight is
// model.embed_tokens.weight.
absl::StatusOr<ModelDescription> DescribeLlama(const v1::ModelSpec& model) {
  RETURN_IF_ERROR(CheckLlamaConfig(model));
  const v1::LlamaConfig llama = WithLlamaDefaults(model.llama());
  const int64_t c = llama.hidden_size();
  Builder builder;
  const int embed = builder.AddModule("model.embed_tokens", ModuleKind::kTokenEmbedding, 0);
  const int embed_weight = builder.AddParameter(embed, "weight", {llama.vocab_size(), c});
  builder.AddStage(embed, {embed_weight}, false);
  for (int n = 0; n < llama.num_hidden_layers(); ++n) {
    const int layer = builder.AddModule(absl::StrCat("model.layers.", n), ModuleKind::kBlock, n);
    builder.AddStage(layer, AddLlamaLayer(builder, layer, llama), /*checkpointable=*/true);
  }
  const int norm = builder.AddModule("model.norm", ModuleKind::kFinalNorm, 0);
  builder.AddStage(norm, {builder.AddParameter(norm, "weight", {c})}, false);
  const int head = builder.AddModule("lm_head", ModuleKind::kLmHead, 0);
  const int head_weight = llama.tie_word_embeddings()
                              ? embed_weight
                              : builder.AddParameter(head, "weight", {llama.vocab_size(), c});
  builder.AddStage(head, {head_weight}, false);
  return builder.Finish("model.llama");
}

// What each job.wrap.modules value wraps.
constexpr std::pair<v1::WrapModule::Value, ModuleKind> kWrappedKinds[] = {
    {v1::WrapModule::BLOCK, ModuleKind::kBlock},
    {v1::WrapModule::POSITION_EMBEDDING, ModuleKind::kPositionEmbedding},
    {v1::WrapModule::TOKEN_EMBEDDING, ModuleKind::kTokenEmbedding},
    {v1::WrapModule::LM_HEAD, ModuleKind::kLmHead},
};

// The module kinds job.wrap.modules names, each one the model has: a Llama has no
// position embedding (RoPE rotates instead), and a unit of nothing would be dropped
// without a word where the user asked for one.
absl::StatusOr<std::vector<ModuleKind>> WrappedKinds(const ModelDescription& model,
                                                     const v1::WrapPolicy& wrap) {
  std::vector<ModuleKind> kinds;
  for (int i = 0; i < wrap.modules_size(); ++i) {
    const std::string field = absl::StrCat("wrap.modules[", i, "]");
    const auto wrapped =
        std::find_if(std::begin(kWrappedKinds), std::end(kWrappedKinds),
                     [&](const auto& entry) { return entry.first == wrap.modules(i); });
    if (wrapped == std::end(kWrappedKinds)) {
      return Invalid(field, absl::StrCat("unknown value ", wrap.modules(i),
                                         " (expected BLOCK, POSITION_EMBEDDING, "
                                         "TOKEN_EMBEDDING or LM_HEAD)"));
    }
    const ModuleKind kind = wrapped->second;
    const bool present =
        std::any_of(model.modules.begin(), model.modules.end(),
                    [kind](const ModuleDesc& module) { return module.kind == kind; });
    if (!present) {
      return Invalid(field, absl::StrCat(v1::WrapModule::Value_Name(wrap.modules(i)),
                                         " names no module of this model (a Llama has no "
                                         "position embedding: RoPE rotates instead)"));
    }
    kinds.push_back(kind);
  }
  return kinds;
}

// Per module, the child unit it starts (-1: none) by job.wrap; children not yet numbered
// in forward order (the caller renumbers).
absl::StatusOr<std::vector<int>> WrappedModules(const ModelDescription& model,
                                                const v1::WrapPolicy& wrap) {
  std::vector<int> unit_of_module(model.modules.size(), -1);
  const bool mlp = !model.modules.empty() && model.modules[0].kind == ModuleKind::kLinearLayer;
  if (mlp) {
    if (wrap.modules_size() > 0) {
      return Invalid("wrap.modules",
                     "applies to model.gpt and model.llama; the MLP takes wrap.layers_per_unit");
    }
    const int per_unit = std::max(1, wrap.layers_per_unit());
    const int layers = static_cast<int>(model.modules.size());
    const int children = layers / per_unit;
    for (int l = 0; l < children * per_unit; ++l) unit_of_module[l] = l / per_unit;
    return unit_of_module;
  }
  if (wrap.layers_per_unit() > 1) {
    return Invalid("wrap.layers_per_unit",
                   "applies to the MLP; model.gpt and model.llama take wrap.modules");
  }
  ASSIGN_OR_RETURN(std::vector<ModuleKind> kinds, WrappedKinds(model, wrap));
  if (kinds.empty()) kinds.push_back(ModuleKind::kBlock);
  int next = 0;
  for (size_t m = 0; m < model.modules.size(); ++m) {
    if (std::find(kinds.begin(), kinds.end(), model.modules[m].kind) != kinds.end()) {
      unit_of_module[m] = next++;
    }
  }
  return unit_of_module;
}

}  // namespace

int64_t ParameterDesc::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ModelDescription::num_parameters() const {
  int64_t total = 0;
  for (const ParameterDesc& p : params) total += p.numel();
  return total;
}

int ModelDescription::FindParameter(const std::string& name) const {
  for (int p = 0; p < static_cast<int>(params.size()); ++p) {
    if (params[p].name == name) return p;
  }
  return -1;
}

absl::StatusOr<ModelDescription> DescribeModel(const v1::ModelSpec& model) {
  if (model.has_gpt()) return DescribeGpt(model);
  if (model.has_llama()) return DescribeLlama(model);
  return DescribeMlp(model);
}

absl::StatusOr<UnitAssignment> AssignUnits(const ModelDescription& model,
                                           const v1::WrapPolicy& wrap) {
  auto wrapped = WrappedModules(model, wrap);
  if (!wrapped.ok()) return wrapped.status();
  const std::vector<int>& unit_of_module = *wrapped;
  // Children are numbered in the order their first stage runs; the root comes last.
  std::vector<int> renumber(model.modules.size(), -1);
  int children = 0;
  for (const StageDesc& stage : model.stages) {
    const int child = unit_of_module[stage.module];
    if (child >= 0 && renumber[child] < 0) renumber[child] = children++;
  }
  UnitAssignment units;
  units.num_units = children + 1;
  auto unit_of = [&](int module) {
    return unit_of_module[module] >= 0 ? renumber[unit_of_module[module]] : units.root();
  };
  for (const StageDesc& stage : model.stages) units.unit_of_stage.push_back(unit_of(stage.module));
  // A parameter belongs to its module's unit; if that is the root, to the unit of a
  // wrapped module that reads it (PyTorch flattens a shared parameter into the first
  // wrapped module that holds it).
  for (int p = 0; p < static_cast<int>(model.params.size()); ++p) {
    int unit = unit_of(model.params[p].module);
    for (size_t s = 0; s < model.stages.size() && unit == units.root(); ++s) {
      const auto& reads = model.stages[s].params;
      if (std::find(reads.begin(), reads.end(), p) != reads.end()) unit = units.unit_of_stage[s];
    }
    units.unit_of_param.push_back(unit);
  }
  for (size_t s = 0; s < model.stages.size(); ++s) {
    const int unit = units.unit_of_stage[s];
    for (int p : model.stages[s].params) {
      const int holder = units.unit_of_param[p];
      if (holder == unit || holder == units.root()) continue;
      const std::string& stage_module = model.modules[model.stages[s].module].name;
      return Invalid(
          "wrap",
          absl::StrCat(
              "this policy puts ", model.params[p].name, " into its own FSDP unit, but ",
              stage_module, " reads it too", unit == units.root() ? " from the root unit" : "",
              " (a shared, tied weight must stay in one unit with every module that uses it); "
              "leave TOKEN_EMBEDDING and LM_HEAD out of wrap.modules"));
    }
  }
  return units;
}

}  // namespace shardwise
