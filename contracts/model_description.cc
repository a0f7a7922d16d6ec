#include "contracts/model_description.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
      model.has_bias()) {
    return Invalid("model",
                   "sets model.gpt and MLP fields (layer_widths, activation, bias); "
                   "a model is one or the other");
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
  if (!v1::Activation_IsValid(gpt.activation()) || gpt.activation() == v1::RELU) {
    return Invalid("model.gpt.activation",
                   absl::StrCat("must be GELU or GELU_TANH, got ", gpt.activation()));
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

// Per module, the child unit it starts (-1: none) by job.wrap; children not yet numbered
// in forward order (the caller renumbers).
absl::StatusOr<std::vector<int>> WrappedModules(const ModelDescription& model,
                                                const v1::WrapPolicy& wrap) {
  std::vector<int> unit_of_module(model.modules.size(), -1);
  const bool mlp = !model.modules.empty() && model.modules[0].kind == ModuleKind::kLinearLayer;
  if (mlp) {
    if (wrap.modules_size() > 0) {
      return Invalid("wrap.modules", "applies to model.gpt; the MLP takes wrap.layers_per_unit");
    }
    const int per_unit = std::max(1, wrap.layers_per_unit());
    const int layers = static_cast<int>(model.modules.size());
    const int children = layers / per_unit;
    for (int l = 0; l < children * per_unit; ++l) unit_of_module[l] = l / per_unit;
    return unit_of_module;
  }
  if (wrap.layers_per_unit() > 1) {
    return Invalid("wrap.layers_per_unit", "applies to the MLP; model.gpt takes wrap.modules");
  }
  std::vector<ModuleKind> kinds;
  for (int i = 0; i < wrap.modules_size(); ++i) {
    switch (wrap.modules(i)) {
      case v1::WrapModule::BLOCK:
        kinds.push_back(ModuleKind::kBlock);
        break;
      case v1::WrapModule::POSITION_EMBEDDING:
        kinds.push_back(ModuleKind::kPositionEmbedding);
        break;
      case v1::WrapModule::TOKEN_EMBEDDING:
        kinds.push_back(ModuleKind::kTokenEmbedding);
        break;
      case v1::WrapModule::LM_HEAD:
        kinds.push_back(ModuleKind::kLmHead);
        break;
      default:
        return Invalid(absl::StrCat("wrap.modules[", i, "]"),
                       absl::StrCat("unknown value ", wrap.modules(i),
                                    " (expected BLOCK, "
                                    "POSITION_EMBEDDING, TOKEN_EMBEDDING or LM_HEAD)"));
    }
  }
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
  return model.has_gpt() ? DescribeGpt(model) : DescribeMlp(model);
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
