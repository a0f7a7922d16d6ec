#include "worker/model/model.h"

#include "absl/strings/str_cat.h"
#include "contracts/transformer_config.h"
#include "worker/model/block.h"
#include "worker/model/checkpointed_stage.h"
#include "worker/model/embeddings.h"
#include "worker/model/layer_norm.h"
#include "worker/model/llama_block.h"
#include "worker/model/lm_head.h"
#include "worker/model/mlp.h"
#include "worker/model/norm_stage.h"
#include "worker/model/rms_norm.h"
#include "worker/model/rotary.h"

namespace shardwise::model {
namespace {

// Looks parameters up by their state-dict names under one module.
class Names {
 public:
  Names(const ModelDescription& description, const ModuleDesc& module)
      : description_(description), prefix_(module.name + ".") {}
  // The index of "<module>.<leaf>", or -1 when the model has none (a bias turned off).
  int operator()(const std::string& leaf) const {
    return description_.FindParameter(prefix_ + leaf);
  }

 private:
  const ModelDescription& description_;
  const std::string prefix_;
};

std::unique_ptr<Stage> MlpStage(const v1::ModelSpec& spec, const ModuleDesc& module,
                                const Names& names) {
  const int l = module.index;
  const int layers = spec.layer_widths_size() - 1;
  return std::make_unique<MlpLayer>(
      Linear(names("weight"), names("bias"), spec.layer_widths(l), spec.layer_widths(l + 1)),
      spec.activation(), l == 0, l + 1 == layers);
}

std::unique_ptr<Stage> GptBlock(const v1::GptConfig& gpt, const Names& names) {
  const int64_t c = gpt.n_embd();
  BlockModules modules{
      LayerNorm(names("ln_1.weight"), names("ln_1.bias"), c),
      LayerNorm(names("ln_2.weight"), names("ln_2.bias"), c),
      CausalSelfAttention(Linear(names("attn.c_attn.weight"), names("attn.c_attn.bias"), c, 3 * c),
                          Linear(names("attn.c_proj.weight"), names("attn.c_proj.bias"), c, c),
                          gpt.n_head(), gpt.attention()),
      Linear(names("mlp.c_fc.weight"), names("mlp.c_fc.bias"), c, 4 * c),
      Linear(names("mlp.c_proj.weight"), names("mlp.c_proj.bias"), 4 * c, c),
      gpt.activation() == v1::GELU_TANH ? v1::GELU_TANH : v1::GELU};
  return std::make_unique<Block>(modules);
}

std::unique_ptr<Stage> LlamaLayer(const v1::LlamaConfig& llama, const Names& names,
                                  std::shared_ptr<RotaryTables> rotary) {
  const int64_t c = llama.hidden_size(), f = llama.intermediate_size();
  const int64_t q = llama.num_attention_heads() * llama.head_dim();
  const int64_t kv = llama.num_key_value_heads() * llama.head_dim();
  const auto linear = [&](const std::string& name, int64_t in, int64_t out) {
    return Linear(names(name + ".weight"), names(name + ".bias"), in, out);
  };
  const auto eps = static_cast<float>(llama.rms_norm_eps());
  LlamaAttentionModules attention{linear("self_attn.q_proj", c, q),
                                  linear("self_attn.k_proj", c, kv),
                                  linear("self_attn.v_proj", c, kv),
                                  linear("self_attn.o_proj", q, c),
                                  llama.num_attention_heads(),
                                  llama.num_key_value_heads(),
                                  llama.head_dim(),
                                  llama.attention()};
  return std::make_unique<LlamaBlock>(
      LlamaBlockModules{RmsNorm(names("input_layernorm.weight"), c, eps),
                        RmsNorm(names("post_attention_layernorm.weight"), c, eps),
                        LlamaAttention(attention, std::move(rotary)),
                        SwiGlu(linear("mlp.gate_proj", c, f), linear("mlp.up_proj", c, f),
                               linear("mlp.down_proj", f, c))});
}

// Builds each stage of one model; the Llama's attention layers share one set of rotary
// tables.
class StageFactory {
 public:
  StageFactory(const v1::ModelSpec& spec, const ModelDescription& description)
      : spec_(spec), description_(description) {
    if (spec.has_llama()) {
      llama_ = WithLlamaDefaults(spec.llama());
      rotary_ = std::make_shared<RotaryTables>(llama_);
    }
  }

  absl::StatusOr<std::unique_ptr<Stage>> Make(const StageDesc& stage) const {
    const ModuleDesc& module = description_.modules[stage.module];
    const Names names(description_, module);
    const int64_t c = HiddenSize(spec_);
    switch (module.kind) {
      case ModuleKind::kLinearLayer:
        return MlpStage(spec_, module, names);
      case ModuleKind::kTokenEmbedding:
        return std::unique_ptr<Stage>(std::make_unique<TokenEmbedding>(names("weight"), c));
      case ModuleKind::kPositionEmbedding:
        return std::unique_ptr<Stage>(std::make_unique<PositionEmbedding>(names("weight"), c));
      case ModuleKind::kBlock:
        return spec_.has_llama() ? LlamaLayer(llama_, names, rotary_)
                                 : GptBlock(spec_.gpt(), names);
      case ModuleKind::kFinalNorm:
        return FinalNorm(names, c);
      case ModuleKind::kLmHead:
        // The stage reads one weight: lm_head.weight, or the embedding's when tied.
        return std::unique_ptr<Stage>(
            std::make_unique<LmHead>(stage.params.at(0), c, VocabSize(spec_)));
    }
    return absl::InternalError(absl::StrCat("no stage for module ", module.name));
  }

 private:
  std::unique_ptr<Stage> FinalNorm(const Names& names, int64_t c) const {
    if (spec_.has_llama()) {
      return std::make_unique<NormStage<RmsNorm>>(
          RmsNorm(names("weight"), c, static_cast<float>(llama_.rms_norm_eps())));
    }
    return std::make_unique<NormStage<LayerNorm>>(LayerNorm(names("weight"), names("bias"), c));
  }

  const v1::ModelSpec& spec_;
  const ModelDescription& description_;
  v1::LlamaConfig llama_;
  std::shared_ptr<RotaryTables> rotary_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const v1::JobSpec& spec,
                                                     const ModelDescription& description) {
  std::vector<std::unique_ptr<Stage>> stages;
  const StageFactory factory(spec.model(), description);
  for (const StageDesc& desc : description.stages) {
    auto stage = factory.Make(desc);
    if (!stage.ok()) return stage.status();
    if (spec.activation_checkpointing() && desc.checkpointable) {
      *stage = std::make_unique<CheckpointedStage>(std::move(*stage));
    }
    stages.push_back(std::move(*stage));
  }
  return std::unique_ptr<Model>(new Model(std::move(stages), MakeLoss(spec.loss())));
}

StageContext Model::Context(const ParameterTable* params) const {
  StageContext context;
  context.device = device_;
  context.compute = compute_;
  context.storage = device_->StorageType(compute_);
  context.params = params;
  context.batch = &batch_;
  return context;
}

namespace {

template <typename T>
Buffer Upload(Device* device, const std::vector<T>& host, ScalarType type) {
  if (host.empty()) return Buffer();
  Buffer buffer(device->allocator(), host.size(), MemoryCategory::kActivations, type, false);
  device->CopyFromHost(buffer.as<void>(), host.data(), buffer.bytes());
  return buffer;
}

}  // namespace

void Model::Begin(const MicroBatch& batch, Device* device, ScalarType compute) {
  device_ = device;
  compute_ = compute;
  batch_.rows = batch.rows;
  batch_.sequences = batch.sequences;
  batch_.sequence_length = batch.sequence_length;
  batch_.tokens = Upload(device, batch.tokens, ScalarType::kInt64);
  if (batch.sequence_length > 0) {
    std::vector<int64_t> positions(batch.rows);
    for (int64_t i = 0; i < batch.rows; ++i) positions[i] = i % batch.sequence_length;
    batch_.positions = Upload(device, positions, ScalarType::kInt64);
  }
  batch_.labels = Upload(device, batch.labels, ScalarType::kInt64);
  batch_.targets = Upload(device, batch.targets, ScalarType::kFloat32);
  // MixedPrecision casts floating-point inputs to param_dtype.
  flow_.hidden = Upload(device, batch.inputs, ScalarType::kFloat32);
  if (!flow_.hidden.empty()) {
    const StageContext context = Context(nullptr);
    context.Round(flow_.hidden);
    flow_.hidden = context.Stored(std::move(flow_.hidden));
  }
}

void Model::Forward(int stage, const ParameterTable& params) {
  stages_[stage]->Forward(Context(&params), flow_);
}

void Model::Loss(float scale, double* loss) {
  loss_->Compute(Context(nullptr), flow_, scale, loss);
}

void Model::Backward(int stage, const ParameterTable& params) {
  stages_[stage]->Backward(Context(&params), flow_);
}

void Model::End() {
  for (const auto& stage : stages_) stage->DropSaved();
  flow_ = Flow();
  batch_ = DeviceBatch();
}

}  // namespace shardwise::model
