#include "contracts/job_spec_validation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/path_policy.h"
#include "common/printable_text.h"
#include "common/status_macros.h"
#include "contracts/checkpoint_files.h"
#include "contracts/checkpoint_fit.h"
#include "contracts/fsdp_layout.h"
#include "contracts/huggingface_layout.h"
#include "contracts/job_ranks.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/model_description.h"
#include "contracts/token_files.h"
#include "contracts/transformer_config.h"
#include "contracts/weights_file.h"
#include "tokenizer/manifest.h"

namespace shardwise {
namespace {

absl::Status Invalid(const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("job.", field, ": ", message));
}

// Proto3 keeps enum numbers it does not know (from a newer client, or a hand-made
// request); `is_valid` is the generated *_IsValid for the enum.
// `path`: the field's whole name, as the caller's message names it.
absl::Status CheckEnumAt(const std::string& path, int value, bool (*is_valid)(int),
                         const std::string& expected) {
  if (is_valid(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": unknown value ", value, " (expected ", expected, ")"));
}

absl::Status CheckEnum(const std::string& field, int value, bool (*is_valid)(int),
                       const std::string& expected) {
  return CheckEnumAt(absl::StrCat("job.", field), value, is_valid, expected);
}

// `limit` names whose limit `max` is: a fixed bound ("the limit") or a tunable one
// (JobLimits::tunable).
absl::Status CheckCount(const std::string& field, int64_t value, int64_t max,
                        bool zero_means_default, const std::string& limit = "the limit") {
  if (value < 0 || (value == 0 && !zero_means_default)) {
    return Invalid(field, absl::StrCat("must be positive, got ", value));
  }
  if (value > max) {
    return Invalid(field, absl::StrCat(value, " exceeds ", limit, " of ", max));
  }
  return absl::OkStatus();
}

absl::Status CheckReal(const std::string& field, double value, double min, bool min_inclusive) {
  if (!std::isfinite(value) || value < min || (!min_inclusive && value == min)) {
    return Invalid(field, absl::StrCat("must be ", min_inclusive ? ">= " : "> ", ShownNumber(min),
                                       " and finite, got ", ShownNumber(value)));
  }
  return absl::OkStatus();
}

// `names` is what the field names: "a file" or "a folder".
absl::Status CheckPath(const std::string& field, const std::string& path, const char* names,
                       const PathChecker& check_path) {
  if (path.empty()) return Invalid(field, absl::StrCat("must name ", names, ", got an empty path"));
  if (!check_path) return absl::OkStatus();
  absl::Status status = check_path(path);
  if (status.ok()) return status;
  return Invalid(field, absl::StrCat("'", path, "': ", status.message()));
}

// Every path the spec names becomes a file name on the coordinator and the workers: it
// must be printable text (a NUL would cut it short where the system reads it).
absl::Status CheckPathTexts(const v1::JobSpec& spec) {
  v1::JobSpec copy = spec;  // ForEachPathField visits mutable fields; these stay unchanged
  return ForEachPathField(&copy, [](const PathField& field, std::string* path) {
    return CheckPathText(field.name, *path);
  });
}

absl::Status ValidateMlp(const v1::ModelSpec& model, const JobLimits& limits) {
  const auto& widths = model.layer_widths();
  if (widths.size() - 1 > static_cast<size_t>(limits.max_layers)) {
    return Invalid(
        "model.layer_widths",
        absl::StrCat(widths.size() - 1, " layers exceed the limit of ", limits.max_layers));
  }
  for (int i = 0; i < widths.size(); ++i) {
    RETURN_IF_ERROR(CheckCount(absl::StrCat("model.layer_widths[", i, "]"), widths[i],
                               limits.max_layer_width, /*zero_means_default=*/false));
  }
  return CheckEnum("model.activation", model.activation(), v1::Activation_IsValid,
                   "RELU, GELU, GELU_TANH or SILU");
}

absl::Status ValidateGpt(const v1::GptConfig& gpt, const JobLimits& limits) {
  RETURN_IF_ERROR(
      CheckCount("model.gpt.vocab_size", gpt.vocab_size(), limits.max_vocab_size, false));
  RETURN_IF_ERROR(
      CheckCount("model.gpt.block_size", gpt.block_size(), limits.max_block_size, false));
  RETURN_IF_ERROR(CheckCount("model.gpt.n_layer", gpt.n_layer(), limits.max_layers, false));
  RETURN_IF_ERROR(CheckCount("model.gpt.n_embd", gpt.n_embd(), limits.max_layer_width, false));
  RETURN_IF_ERROR(CheckEnum("model.gpt.attention", gpt.attention(),
                            v1::GptConfig::Attention_IsValid, "MATERIALIZED or FUSED"));
  // That n_head divides n_embd is the model description's rule (DescribeModel).
  RETURN_IF_ERROR(CheckCount("model.gpt.n_head", gpt.n_head(), limits.max_layer_width, false));
  if (gpt.n_head() > gpt.n_embd()) {
    return Invalid("model.gpt.n_head", absl::StrCat(gpt.n_head(), " exceeds model.gpt.n_embd (",
                                                    gpt.n_embd(), "), which it must divide"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLlama(const v1::LlamaConfig& given, const JobLimits& limits) {
  const v1::LlamaConfig llama = WithLlamaDefaults(given);
  RETURN_IF_ERROR(
      CheckCount("model.llama.vocab_size", llama.vocab_size(), limits.max_vocab_size, false));
  // The context a model was made for may exceed what one job trains with (block_size),
  // but not when it stands in for block_size, which it does when that is not given.
  RETURN_IF_ERROR(CheckCount("model.llama.max_position_embeddings", llama.max_position_embeddings(),
                             std::numeric_limits<int64_t>::max(), true));
  if (given.block_size() == 0 && llama.max_position_embeddings() > limits.max_block_size) {
    return Invalid("model.llama.max_position_embeddings",
                   absl::StrCat(llama.max_position_embeddings(), " exceeds the limit of ",
                                limits.max_block_size,
                                " on model.llama.block_size, which it stands in for when not "
                                "given: set block_size to the context to train with"));
  }
  RETURN_IF_ERROR(
      CheckCount("model.llama.block_size", llama.block_size(), limits.max_block_size, false));
  RETURN_IF_ERROR(CheckCount("model.llama.num_hidden_layers", llama.num_hidden_layers(),
                             limits.max_layers, false));
  for (const auto& [field, value] :
       {std::make_pair("hidden_size", llama.hidden_size()),
        std::make_pair("intermediate_size", llama.intermediate_size()),
        std::make_pair("num_attention_heads", int64_t{llama.num_attention_heads()}),
        std::make_pair("num_key_value_heads", int64_t{llama.num_key_value_heads()}),
        std::make_pair("head_dim", llama.head_dim())}) {
    RETURN_IF_ERROR(
        CheckCount(absl::StrCat("model.llama.", field), value, limits.max_layer_width, false));
  }
  // Query heads of head_dim each: their width is the attention's.
  if (llama.num_attention_heads() * llama.head_dim() > limits.max_layer_width) {
    return Invalid(
        "model.llama.num_attention_heads",
        absl::StrCat(llama.num_attention_heads(), " heads of head_dim ", llama.head_dim(),
                     " exceed the width limit of ", limits.max_layer_width));
  }
  return CheckEnum("model.llama.attention", llama.attention(), v1::GptConfig::Attention_IsValid,
                   "MATERIALIZED or FUSED");
}

// The model's sizes against the limits, then its description (which checks the rest:
// n_embd divisible by n_head, the kinds not mixed) and the wrap policy over it.
absl::Status ValidateModel(const v1::JobSpec& spec, const JobLimits& limits) {
  const v1::ModelSpec& model = spec.model();
  if (model.has_gpt() && model.has_llama()) {
    return Invalid("model", "sets both model.gpt and model.llama; a model is one kind");
  }
  if (model.has_gpt()) {
    RETURN_IF_ERROR(ValidateGpt(model.gpt(), limits));
  } else if (model.has_llama()) {
    RETURN_IF_ERROR(ValidateLlama(model.llama(), limits));
  } else if (model.layer_widths_size() >= 2) {
    RETURN_IF_ERROR(ValidateMlp(model, limits));
  }
  ASSIGN_OR_RETURN(const ModelDescription description, DescribeModel(model));
  const std::string field = ModelField(model);
  if (description.num_parameters() > limits.max_parameters) {
    return Invalid(field, absl::StrCat(description.num_parameters(), " parameters exceed ",
                                       limits.tunable, " of ", limits.max_parameters));
  }
  if (spec.wrap().layers_per_unit() < 0) {
    return Invalid("wrap.layers_per_unit",
                   absl::StrCat("must be positive, got ", spec.wrap().layers_per_unit()));
  }
  RETURN_IF_ERROR(AssignUnits(description, spec.wrap()).status());
  if (IsTransformer(model)) {
    if (spec.loss() != v1::LOSS_UNSPECIFIED && spec.loss() != v1::CROSS_ENTROPY) {
      return Invalid("loss", absl::StrCat(field, " trains with CROSS_ENTROPY, got ",
                                          v1::Loss_Name(spec.loss())));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateFsdp(const v1::JobSpec& spec) {
  const v1::FsdpConfig& fsdp = spec.fsdp();
  RETURN_IF_ERROR(CheckEnum("fsdp.sharding_strategy", fsdp.sharding_strategy(),
                            v1::ShardingStrategy::Value_IsValid,
                            "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or "
                            "HYBRID_SHARD_ZERO2"));
  const bool hybrid = fsdp.sharding_strategy() == v1::ShardingStrategy::HYBRID_SHARD ||
                      fsdp.sharding_strategy() == v1::ShardingStrategy::HYBRID_SHARD_ZERO2;
  if (hybrid) {
    if (fsdp.shard_group_size() <= 0) {
      return Invalid("fsdp.shard_group_size",
                     absl::StrCat("must be positive for ",
                                  v1::ShardingStrategy::Value_Name(fsdp.sharding_strategy()),
                                  ", got ", fsdp.shard_group_size()));
    }
    if (spec.world_size() % fsdp.shard_group_size() != 0) {
      return Invalid("fsdp.shard_group_size",
                     absl::StrCat(fsdp.shard_group_size(), " does not divide job.world_size ",
                                  spec.world_size()));
    }
  } else if (fsdp.shard_group_size() != 0) {
    return Invalid("fsdp.shard_group_size",
                   absl::StrCat("is only for HYBRID_SHARD and HYBRID_SHARD_ZERO2, got ",
                                fsdp.shard_group_size()));
  }
  const char* kDtypes = "FP32, FP16 or BF16";
  RETURN_IF_ERROR(CheckEnum("fsdp.mixed_precision.param_dtype",
                            fsdp.mixed_precision().param_dtype(), v1::Dtype_IsValid, kDtypes));
  RETURN_IF_ERROR(CheckEnum("fsdp.mixed_precision.reduce_dtype",
                            fsdp.mixed_precision().reduce_dtype(), v1::Dtype_IsValid, kDtypes));
  return CheckEnum("fsdp.backward_prefetch", fsdp.backward_prefetch(),
                   v1::BackwardPrefetch::Value_IsValid, "BACKWARD_PRE, BACKWARD_POST or NONE");
}

absl::Status ValidateOptimizer(const v1::OptimizerSpec& optimizer) {
  switch (optimizer.kind_case()) {
    case v1::OptimizerSpec::kSgd: {
      const v1::SgdOptions& sgd = optimizer.sgd();
      RETURN_IF_ERROR(CheckReal("optimizer.sgd.lr", sgd.lr(), 0, /*min_inclusive=*/false));
      RETURN_IF_ERROR(CheckReal("optimizer.sgd.momentum", sgd.momentum(), 0, true));
      RETURN_IF_ERROR(CheckReal("optimizer.sgd.dampening", sgd.dampening(), 0, true));
      RETURN_IF_ERROR(CheckReal("optimizer.sgd.weight_decay", sgd.weight_decay(), 0, true));
      if (sgd.nesterov() && (sgd.momentum() <= 0 || sgd.dampening() != 0)) {
        return Invalid("optimizer.sgd.nesterov",
                       absl::StrCat("requires momentum > 0 and dampening == 0, got momentum ",
                                    ShownNumber(sgd.momentum()), " and dampening ",
                                    ShownNumber(sgd.dampening())));
      }
      break;
    }
    case v1::OptimizerSpec::kAdamw: {
      const v1::AdamWOptions& adamw = optimizer.adamw();
      if (adamw.has_lr()) RETURN_IF_ERROR(CheckReal("optimizer.adamw.lr", adamw.lr(), 0, false));
      for (auto [name, has, beta] : {std::make_tuple("beta1", adamw.has_beta1(), adamw.beta1()),
                                     std::make_tuple("beta2", adamw.has_beta2(), adamw.beta2())}) {
        if (has && !(beta >= 0 && beta < 1)) {
          return Invalid(absl::StrCat("optimizer.adamw.", name),
                         absl::StrCat("must be in [0, 1), got ", ShownNumber(beta)));
        }
      }
      if (adamw.has_eps()) RETURN_IF_ERROR(CheckReal("optimizer.adamw.eps", adamw.eps(), 0, true));
      if (adamw.has_weight_decay()) {
        RETURN_IF_ERROR(CheckReal("optimizer.adamw.weight_decay", adamw.weight_decay(), 0, true));
      }
      break;
    }
    case v1::OptimizerSpec::KIND_NOT_SET:
      return Invalid("optimizer", "must set sgd or adamw");
  }
  RETURN_IF_ERROR(CheckEnum("optimizer.weight_decay_params", optimizer.weight_decay_params(),
                            v1::WeightDecayParams::Value_IsValid, "ALL or MATRICES"));
  return CheckReal("optimizer.max_grad_norm", optimizer.max_grad_norm(), 0, true);
}

absl::Status ValidateLrSchedule(const v1::JobSpec& spec) {
  const v1::LrSchedule& schedule = spec.optimizer().lr_schedule();
  RETURN_IF_ERROR(CheckEnum("optimizer.lr_schedule.decay", schedule.decay(),
                            v1::LrSchedule::Decay_IsValid, "CONSTANT, COSINE or LINEAR"));
  for (const auto& [field, value] : {std::make_pair("warmup_steps", schedule.warmup_steps()),
                                     std::make_pair("decay_steps", schedule.decay_steps())}) {
    if (value < 0) {
      return Invalid(absl::StrCat("optimizer.lr_schedule.", field),
                     absl::StrCat("must be >= 0, got ", value));
    }
  }
  const double lr = spec.optimizer().has_sgd()          ? spec.optimizer().sgd().lr()
                    : spec.optimizer().adamw().has_lr() ? spec.optimizer().adamw().lr()
                                                        : 1e-3;
  if (!std::isfinite(schedule.min_lr()) || schedule.min_lr() < 0 || schedule.min_lr() > lr) {
    return Invalid("optimizer.lr_schedule.min_lr",
                   absl::StrCat("must be in [0, lr = ", ShownNumber(lr), "], got ",
                                ShownNumber(schedule.min_lr())));
  }
  const int64_t end = schedule.decay_steps() > 0 ? schedule.decay_steps() : spec.steps();
  if (schedule.decay() != v1::LrSchedule::CONSTANT && end <= schedule.warmup_steps()) {
    return Invalid("optimizer.lr_schedule.decay_steps",
                   absl::StrCat("the decay ends at step ", end,
                                schedule.decay_steps() > 0 ? "" : " (job.steps)",
                                ", not after the warmup's ", schedule.warmup_steps(), " steps"));
  }
  return absl::OkStatus();
}

// optimizer.overlap steps parameters as their gradients arrive, so nothing may need every
// gradient first (clipping by global norm, the loss scaler's skip decision).
absl::Status ValidateOverlap(const v1::JobSpec& spec) {
  const v1::OptimizerOverlap& overlap = spec.optimizer().overlap();
  RETURN_IF_ERROR(CheckEnum("optimizer.overlap.mode", overlap.mode(),
                            v1::OptimizerOverlap::Mode_IsValid,
                            "NONE, HOOK_THEN_OPTIMIZER or IN_BACKWARD"));
  if (overlap.mode() != v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER && overlap.params_size() > 0) {
    return Invalid("optimizer.overlap.params",
                   absl::StrCat("applies to mode HOOK_THEN_OPTIMIZER only, got mode ",
                                v1::OptimizerOverlap::Mode_Name(overlap.mode())));
  }
  ASSIGN_OR_RETURN(const ModelDescription description, DescribeModel(spec.model()));
  for (const std::string& param : overlap.params()) {
    if (description.FindParameter(param) < 0) {
      std::vector<std::string> names;
      for (const ParameterDesc& p : description.params) names.push_back(p.name);
      if (names.size() > 12) names.resize(12), names.push_back("...");
      return Invalid("optimizer.overlap.params",
                     absl::StrCat("'", ShownValue(param), "' is not a parameter of this model (",
                                  absl::StrJoin(names, ", "), ")"));
    }
  }
  if (overlap.mode() == v1::OptimizerOverlap::NONE) return absl::OkStatus();
  if (spec.optimizer().max_grad_norm() > 0) {
    return Invalid("optimizer.overlap.mode",
                   absl::StrCat(v1::OptimizerOverlap::Mode_Name(overlap.mode()),
                                " steps before every gradient exists, so it cannot be combined "
                                "with optimizer.max_grad_norm ",
                                spec.optimizer().max_grad_norm()));
  }
  if (spec.grad_scaler().enabled()) {
    return Invalid("optimizer.overlap.mode",
                   absl::StrCat(v1::OptimizerOverlap::Mode_Name(overlap.mode()),
                                " steps before the loss scaler can check every gradient, so it "
                                "cannot be combined with grad_scaler.enabled"));
  }
  return absl::OkStatus();
}

absl::Status ValidateGradScaler(const v1::GradScaler& scaler) {
  // The scale and the factors are FP32 on the ranks, as PyTorch's scaler keeps them: a
  // value that rounds to 0 or to infinity there would skip every step, silently.
  constexpr double kFloatMin = std::numeric_limits<float>::min();  // the least normal
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  if (scaler.has_init_scale() &&
      !(scaler.init_scale() >= kFloatMin && scaler.init_scale() <= kFloatMax)) {
    return Invalid(
        "grad_scaler.init_scale",
        absl::StrCat("must be in [", ShownNumber(kFloatMin), ", ", ShownNumber(kFloatMax),
                     "] (an FP32, as the scale is kept), got ", ShownNumber(scaler.init_scale())));
  }
  if (scaler.has_growth_factor() &&
      !(scaler.growth_factor() > 1 && scaler.growth_factor() <= kFloatMax)) {
    return Invalid("grad_scaler.growth_factor",
                   absl::StrCat("must be in (1, ", ShownNumber(kFloatMax), "], got ",
                                ShownNumber(scaler.growth_factor())));
  }
  if (scaler.has_backoff_factor() &&
      !(scaler.backoff_factor() >= kFloatMin && scaler.backoff_factor() < 1)) {
    return Invalid("grad_scaler.backoff_factor",
                   absl::StrCat("must be in [", ShownNumber(kFloatMin), ", 1), got ",
                                ShownNumber(scaler.backoff_factor())));
  }
  if (scaler.has_growth_interval() && scaler.growth_interval() <= 0) {
    return Invalid("grad_scaler.growth_interval",
                   absl::StrCat("must be positive, got ", scaler.growth_interval()));
  }
  return absl::OkStatus();
}

// A token file's path; with file checks, its size and header too.
absl::Status CheckTokenFile(const std::string& field, const std::string& path,
                            const v1::JobSpec& spec, const PathChecker& check_path) {
  if (path.empty()) return Invalid(field, "must name a token file, got an empty path");
  if (!check_path) return absl::OkStatus();
  ASSIGN_OR_RETURN(const TokenFileLayout layout,
                   InspectTokenFile(field, path, spec.data().tokens().format(), Links::kFollow));
  const int64_t block_size = BlockSize(spec.model());
  if (layout.count < block_size + 1) {
    return Invalid(field,
                   absl::StrCat("'", path, "' holds ", layout.count, " tokens; a sequence of ",
                                ModelField(spec.model()), ".block_size ", block_size,
                                " needs at least ", block_size + 1));
  }
  return absl::OkStatus();
}

// The tokenizer's folder; with file checks, its vocabulary against the model's.
absl::Status CheckTokenizer(const v1::JobSpec& spec, const PathChecker& check_path) {
  const std::string& dir = spec.data().tokens().tokenizer();
  if (dir.empty() || !check_path) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPath("data.tokens.tokenizer", dir, "a folder", check_path));
  // Every file of the folder, not only its manifest: what a worker copies beside the model
  // and the sampler loads (no link, no FIFO or device, bounded, its hash the manifest's).
  auto manifest = tokenizer::CheckTokenizerFolder(dir);
  if (!manifest.ok()) {
    return Invalid("data.tokens.tokenizer", std::string(manifest.status().message()));
  }
  const int64_t model_vocabulary = VocabSize(spec.model());
  if (manifest->vocab_size > model_vocabulary) {
    return Invalid(
        "data.tokens.tokenizer",
        absl::StrCat("'", dir, "' has a vocabulary of ", manifest->vocab_size, " ids, more than ",
                     ModelField(spec.model()), ".vocab_size ", model_vocabulary,
                     ": set vocab_size to at least ", manifest->vocab_size));
  }
  return absl::OkStatus();
}

absl::Status ValidateTokens(const v1::JobSpec& spec, const PathChecker& check_path) {
  const v1::TokenData& tokens = spec.data().tokens();
  if (!IsTransformer(spec.model())) {
    return Invalid("data.tokens",
                   "is data for model.gpt and model.llama; the MLP reads data.safetensors_path "
                   "or data.synthetic");
  }
  RETURN_IF_ERROR(CheckEnum("data.tokens.format", tokens.format(), v1::TokenData::Format_IsValid,
                            "UINT16 or SAFETENSORS"));
  RETURN_IF_ERROR(CheckTokenFile("data.tokens.train_path", tokens.train_path(), spec, check_path));
  if (!tokens.val_path().empty()) {
    RETURN_IF_ERROR(CheckTokenFile("data.tokens.val_path", tokens.val_path(), spec, check_path));
  }
  return CheckTokenizer(spec, check_path);
}

// What the batch's rows are split over, as the user set it.
std::string RanksNamed(const v1::JobSpec& spec) {
  return JobRanks(spec) == spec.world_size()
             ? "job.world_size"
             : "the job's ranks (fault_tolerance.max_replicas x ranks per group)";
}

// What fault tolerance covers today (docs/operations.md, "Fault-tolerant jobs").
absl::Status ValidateFaultTolerance(const v1::JobSpec& spec, const JobLimits& limits) {
  if (!spec.has_fault_tolerance()) return absl::OkStatus();
  const v1::FaultTolerance& tolerance = spec.fault_tolerance();
  auto strategy = spec.fsdp().sharding_strategy();
  if (strategy == v1::ShardingStrategy::SHARDING_STRATEGY_UNSPECIFIED) {
    strategy = v1::ShardingStrategy::FULL_SHARD;  // the default, applied after validation
  }
  const bool hybrid = strategy == v1::ShardingStrategy::HYBRID_SHARD ||
                      strategy == v1::ShardingStrategy::HYBRID_SHARD_ZERO2;
  if (strategy != v1::ShardingStrategy::NO_SHARD && !hybrid) {
    return Invalid("fault_tolerance",
                   absl::StrCat("needs fsdp.sharding_strategy NO_SHARD or a HYBRID strategy (a "
                                "replica of the model per group), got ",
                                v1::ShardingStrategy::Value_Name(strategy),
                                ": no other rank holds a lost rank's shard; a checkpoint restart "
                                "(restart_policy) covers it"));
  }
  // Replicas: shard groups under HYBRID (fsdp.shard_group_size is checked before this).
  const int32_t group_size = ReplicaGroupSize(spec);
  const int32_t replicas = spec.world_size() / group_size;
  const int32_t most = limits.max_world_size / group_size;
  if (tolerance.max_replicas() != 0 &&
      (tolerance.max_replicas() < replicas || tolerance.max_replicas() > most)) {
    return Invalid(
        "fault_tolerance.max_replicas",
        absl::StrCat("must be the job's ", replicas, " initial replicas (0) to ", most, " (",
                     limits.max_world_size, " ranks), got ", tolerance.max_replicas()));
  }
  if (std::max(replicas, tolerance.max_replicas()) < 2) {
    return Invalid("fault_tolerance",
                   absl::StrCat("needs two or more replicas to train on after a loss, got ",
                                replicas, " (job.world_size ", spec.world_size(),
                                hybrid ? absl::StrCat(" in shard groups of ", group_size) : "",
                                ") and fault_tolerance.max_replicas ", tolerance.max_replicas()));
  }
  if (tolerance.min_replicas() < 0 || tolerance.min_replicas() > replicas) {
    return Invalid("fault_tolerance.min_replicas",
                   absl::StrCat("must be 1 to the job's ", replicas, " replicas (0: 1), got ",
                                tolerance.min_replicas()));
  }
  if (tolerance.peer_timeout_seconds() < 0 || tolerance.peer_timeout_seconds() > 3600) {
    return Invalid(
        "fault_tolerance.peer_timeout_seconds",
        absl::StrCat("must be 1 to 3600 (0: 10), got ", tolerance.peer_timeout_seconds()));
  }
  RETURN_IF_ERROR(CheckEnum("fault_tolerance.batch", tolerance.batch(),
                            v1::FaultTolerance::Batch_IsValid, "DROP or KEEP_GLOBAL"));
  // NCCL would need its communicators aborted and rebuilt around the survivors; Gloo's
  // connections, which the host-staged path runs on, close and reconnect as on the CPU.
  // (cuda.collectives is checked before this: here it is NCCL, named or by default.)
  const auto collectives = spec.cuda().collectives();
  if (spec.device() == v1::CUDA && collectives != v1::CudaOptions::HOST_STAGED_GLOO) {
    return Invalid("fault_tolerance",
                   absl::StrCat("covers CUDA jobs with cuda.collectives HOST_STAGED_GLOO for "
                                "now, got ",
                                collectives == v1::CudaOptions::COLLECTIVES_UNSPECIFIED
                                    ? "NCCL (the default)"
                                    : v1::CudaOptions::Collectives_Name(collectives)));
  }
  if (spec.optimizer().overlap().mode() != v1::OptimizerOverlap::NONE) {
    return Invalid("fault_tolerance",
                   absl::StrCat("needs optimizer.overlap.mode NONE, got ",
                                v1::OptimizerOverlap::Mode_Name(spec.optimizer().overlap().mode()),
                                ": an overlapped optimizer steps before the step is committed"));
  }
  if (spec.grad_scaler().enabled()) {
    return Invalid("fault_tolerance",
                   "needs grad_scaler.enabled false, got true (not covered yet)");
  }
  return absl::OkStatus();
}

// Hugging Face checkpoints in and out; with file checks, the one read from is checked
// whole from its headers and config.json (contracts/huggingface_layout.h).
absl::Status ValidateHuggingFace(const v1::JobSpec& spec, const PathChecker& check_path) {
  if (spec.init().has_huggingface()) {
    const v1::HuggingFaceCheckpoint& checkpoint = spec.init().huggingface();
    RETURN_IF_ERROR(CheckEnum("init.huggingface.layout", checkpoint.layout(),
                              v1::HuggingFaceCheckpoint::Layout_IsValid, "HUGGING_FACE or META"));
    RETURN_IF_ERROR(CheckPath("init.huggingface.dir", checkpoint.dir(), "a folder", check_path));
    RETURN_IF_ERROR(
        HuggingFaceTensors(spec.model(), checkpoint.layout(), "job.init.huggingface").status());
    if (check_path) {
      RETURN_IF_ERROR(
          LocateHuggingFaceTensors(spec.model(), checkpoint, "job.init.huggingface", Links::kFollow)
              .status());
    }
  }
  const v1::OutputSpec& output = spec.output();
  if (output.huggingface_dir().empty()) return absl::OkStatus();
  RETURN_IF_ERROR(HuggingFaceTensors(spec.model(), v1::HuggingFaceCheckpoint::HUGGING_FACE,
                                     "job.output.huggingface_dir")
                      .status());
  const std::filesystem::path dir =
      std::filesystem::path(output.huggingface_dir()).lexically_normal();
  if (!output.final_model_path().empty() &&
      std::filesystem::path(output.final_model_path()).lexically_normal() ==
          dir / "model.safetensors") {
    return Invalid(
        "output.final_model_path",
        absl::StrCat("'", output.final_model_path(),
                     "' is output.huggingface_dir's model.safetensors: name another file"));
  }
  if (!check_path || output.overwrite()) return absl::OkStatus();
  // As for final_model_path: files someone else wrote are refused now, not after training.
  for (const std::string& name : HuggingFaceExportNames(spec)) {
    const std::string path = (dir / name).string();
    std::error_code error;
    if (std::filesystem::symlink_status(path, error).type() !=
        std::filesystem::file_type::not_found) {
      // ALREADY_EXISTS, as for final_model_path (path_policy.cc).
      return absl::AlreadyExistsError(
          absl::StrCat("job.output.huggingface_dir: '", ShownValue(path),
                       "' exists already; a job never replaces a file it did not create unless "
                       "output.overwrite is set"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateEvaluation(const v1::JobSpec& spec, const JobLimits& limits) {
  if (!spec.has_evaluation()) return absl::OkStatus();
  if (!spec.data().has_tokens() || spec.data().tokens().val_path().empty()) {
    return Invalid("evaluation", "needs a validation file, data.tokens.val_path");
  }
  if (spec.evaluation().interval_steps() < 0) {
    return Invalid("evaluation.interval_steps",
                   absl::StrCat("must be >= 0, got ", spec.evaluation().interval_steps()));
  }
  return CheckCount("evaluation.batches", spec.evaluation().batches(), limits.max_eval_batches,
                    /*zero_means_default=*/true);
}

absl::Status ValidateData(const v1::JobSpec& spec, const JobLimits& limits,
                          const PathChecker& check_path) {
  if (IsTransformer(spec.model()) && !spec.data().has_tokens()) {
    return Invalid(
        "data", absl::StrCat(ModelField(spec.model()), " trains on token files: set data.tokens"));
  }
  switch (spec.data().source_case()) {
    case v1::DataSpec::kTokens:
      return ValidateTokens(spec, check_path);
    case v1::DataSpec::kSafetensorsPath:
      return CheckPath("data.safetensors_path", spec.data().safetensors_path(), "a file",
                       check_path);
    case v1::DataSpec::kSynthetic:
      return CheckCount("data.synthetic.num_samples", spec.data().synthetic().num_samples(),
                        limits.max_synthetic_samples, /*zero_means_default=*/true);
    case v1::DataSpec::SOURCE_NOT_SET:
      break;
  }
  return Invalid("data", "must set safetensors_path, synthetic or tokens");
}

// init.safetensors_path from its header: the model's every parameter, F32 with its shape
// (contracts/weights_file.h). What this host could not read now stays UNAVAILABLE (the
// client retries); the rest is INVALID_ARGUMENT naming the field and the file.
absl::Status CheckInitialWeightsFile(const v1::JobSpec& spec) {
  const std::string& path = spec.init().safetensors_path();
  ASSIGN_OR_RETURN(const ModelDescription model, DescribeModel(spec.model()));
  const absl::StatusOr<SafetensorsIndex> index = ReadSafetensorsIndex(path, Links::kFollow);
  absl::Status fit = index.ok() ? CheckWeightsFit(model, *index, path) : index.status();
  if (fit.ok() || absl::IsUnavailable(fit)) return fit;
  return Invalid("init.safetensors_path", std::string(fit.message()));  // it names the file
}

// The newest complete checkpoint of init.checkpoint_dir, as a worker will find it, is of
// the job's model and wrap policy. None there yet is no error: a job may name the folder
// of one still running, and wait for workers until it has written one (the workers check
// again as they start, and fail the job if there is none then); nor is a step removed
// while checked (keep_checkpoints). What is checked refuses at once what would fail
// every attempt on the workers; a step this coordinator may not read is refused too
// (INVALID_ARGUMENT), as a worker that may not read it fails rather than taking an older.
absl::Status CheckInitialCheckpoint(const v1::JobSpec& spec) {
  // As the worker's path check leaves it: the checkpoint reads refuse links in the path.
  std::error_code error;
  const std::filesystem::path canonical =
      std::filesystem::canonical(spec.init().checkpoint_dir(), error);
  const std::string dir = error ? spec.init().checkpoint_dir() : canonical.string();
  const absl::StatusOr<fsdp::FoundCheckpoint> newest = fsdp::FindLatestCheckpoint(dir);
  absl::Status fit = newest.status();
  if (newest.ok()) {
    v1::JobSpec effective = spec;  // the workers' spec: what a manifest records
    ApplyJobSpecDefaults(&effective);
    ASSIGN_OR_RETURN(const fsdp::FlatLayout layout,
                     fsdp::BuildFlatLayout(effective.model(), effective.wrap()));
    fit = fsdp::CheckCheckpointFits(newest->folder, newest->manifest, effective, layout);
  }
  if (fit.ok() || absl::IsNotFound(fit)) return absl::OkStatus();
  if (absl::IsPermissionDenied(fit)) {  // as CheckPath refuses an input it cannot read
    return Invalid("init.checkpoint_dir",
                   absl::StrCat(fit.message(), " (this coordinator checks the newest step as a ",
                                "worker reads it, not passing it over for an older one)"));
  }
  return absl::Status(fit.code(), absl::StrCat("job.init.checkpoint_dir: ", fit.message()));
}

// Where the weights come from and where the results go.
absl::Status ValidateInitAndOutput(const v1::JobSpec& spec, const PathChecker& check_path) {
  if (spec.init().has_safetensors_path()) {
    RETURN_IF_ERROR(
        CheckPath("init.safetensors_path", spec.init().safetensors_path(), "a file", check_path));
    if (check_path) RETURN_IF_ERROR(CheckInitialWeightsFile(spec));
  }
  if (spec.init().has_checkpoint_dir()) {
    RETURN_IF_ERROR(
        CheckPath("init.checkpoint_dir", spec.init().checkpoint_dir(), "a folder", check_path));
    if (check_path) RETURN_IF_ERROR(CheckInitialCheckpoint(spec));
  }
  RETURN_IF_ERROR(ValidateHuggingFace(spec, check_path));
  const v1::OutputSpec& output = spec.output();
  if (output.checkpoint_interval_steps() < 0) {
    return Invalid("output.checkpoint_interval_steps",
                   absl::StrCat("must be >= 0, got ", output.checkpoint_interval_steps()));
  }
  if (output.checkpoint_interval_steps() > 0 && output.checkpoint_dir().empty()) {
    return Invalid("output.checkpoint_dir",
                   absl::StrCat("must be set when output.checkpoint_interval_steps is ",
                                output.checkpoint_interval_steps()));
  }
  if (output.keep_checkpoints() < 0) {
    return Invalid("output.keep_checkpoints", absl::StrCat("must be >= 0 (0 keeps every one), got ",
                                                           output.keep_checkpoints()));
  }
  if (output.keep_checkpoints() > 0 && output.checkpoint_interval_steps() == 0) {
    return Invalid("output.keep_checkpoints",
                   absl::StrCat(output.keep_checkpoints(),
                                " needs output.checkpoint_interval_steps > 0: the job writes no "
                                "checkpoints to keep"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckReadableFile(const std::string& path) {
  // Stat before opening: opening a FIFO would block the caller (a coordinator handler)
  // until some writer appears, and a device can be read forever.
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return absl::NotFoundError("no readable file at this path");
  if (S_ISDIR(info.st_mode)) {
    if (::access(path.c_str(), R_OK | X_OK) != 0) {
      return absl::PermissionDeniedError("a folder this coordinator cannot read");
    }
    return absl::OkStatus();
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError("not a regular file (a FIFO, a device or a socket)");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError("no readable file at this path");
  ::close(fd);
  return absl::OkStatus();
}

absl::Status ValidateCommHook(const v1::CommHook& hook, const v1::JobSpec& spec,
                              const std::string& field) {
  const auto invalid = [&field](const std::string& part, const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(field, part, ": ", message));
  };
  RETURN_IF_ERROR(CheckEnumAt(field + ".hook", hook.hook(), v1::CommHook::Hook_IsValid,
                              "NO_HOOK, ALLREDUCE, FP16_COMPRESS, BF16_COMPRESS or "
                              "MIXED_PRECISION"));
  RETURN_IF_ERROR(CheckEnumAt(field + ".wrapper", hook.wrapper(), v1::CommHook::Wrapper_IsValid,
                              "NO_WRAPPER, FP16_WRAPPER or BF16_WRAPPER"));
  const v1::ShardingStrategy::Value strategy = spec.fsdp().sharding_strategy();
  const std::string strategy_name = strategy == v1::ShardingStrategy::SHARDING_STRATEGY_UNSPECIFIED
                                        ? "FULL_SHARD (the default)"
                                        : v1::ShardingStrategy::Value_Name(strategy);
  const std::string name = absl::StrCat(v1::CommHook::Hook_Name(hook.hook()), " with ",
                                        v1::CommHook::Wrapper_Name(hook.wrapper()));
  const bool any_hook =
      hook.hook() != v1::CommHook::NO_HOOK || hook.wrapper() != v1::CommHook::NO_WRAPPER;
  // As PyTorch: FSDP's hybrid strategies take no communication hook.
  if (any_hook && (strategy == v1::ShardingStrategy::HYBRID_SHARD ||
                   strategy == v1::ShardingStrategy::HYBRID_SHARD_ZERO2)) {
    return invalid(
        "", absl::StrCat(name, " is not supported with fsdp.sharding_strategy ", strategy_name,
                         " (hybrid strategies take no communication hook)"));
  }
  const bool all_reduce_only = hook.hook() == v1::CommHook::ALLREDUCE ||
                               hook.hook() == v1::CommHook::MIXED_PRECISION ||
                               hook.wrapper() != v1::CommHook::NO_WRAPPER;
  if (all_reduce_only && strategy != v1::ShardingStrategy::NO_SHARD) {
    return invalid("", absl::StrCat(name,
                                    " reduces by all-reduce and needs "
                                    "fsdp.sharding_strategy NO_SHARD, got ",
                                    strategy_name));
  }
  if (hook.wrapper() != v1::CommHook::NO_WRAPPER && hook.hook() != v1::CommHook::ALLREDUCE) {
    return invalid(".wrapper", absl::StrCat(v1::CommHook::Wrapper_Name(hook.wrapper()),
                                            " wraps a full-precision hook (ALLREDUCE), got ",
                                            v1::CommHook::Hook_Name(hook.hook())));
  }
  if (hook.hook() == v1::CommHook::MIXED_PRECISION) {
    if (spec.fsdp().mixed_precision().keep_low_precision_grads()) {
      return invalid("",
                     "MIXED_PRECISION upcasts gradients for the optimizer, so "
                     "fsdp.mixed_precision.keep_low_precision_grads must be false");
    }
    if (spec.optimizer().overlap().mode() != v1::OptimizerOverlap::NONE) {
      return invalid(
          "", absl::StrCat("MIXED_PRECISION cannot be combined with "
                           "optimizer.overlap.mode ",
                           v1::OptimizerOverlap::Mode_Name(spec.optimizer().overlap().mode()),
                           " (the upcast runs after the reduction, on its own thread)"));
    }
  }
  return absl::OkStatus();
}

// A cuDNN attention option (`field` set to `value`, where `set`): it applies to a model with
// FUSED attention and a 16-bit param_dtype (cuDNN's flash attention has no FP32 kernel).
absl::Status CheckCudnnOption(const v1::JobSpec& spec, const std::string& field,
                              const std::string& value, bool set) {
  if (!set) return absl::OkStatus();
  const v1::ModelSpec& model = spec.model();
  const bool fused = (model.has_gpt() && model.gpt().attention() == v1::GptConfig::FUSED) ||
                     (model.has_llama() && model.llama().attention() == v1::GptConfig::FUSED);
  if (!fused) {
    return Invalid(field, absl::StrCat(value,
                                       " applies to cuDNN's attention: FUSED, and this "
                                       "job's model has no FUSED attention"));
  }
  const v1::Dtype param = spec.fsdp().mixed_precision().param_dtype();
  if (param != v1::BF16 && param != v1::FP16) {
    return Invalid(field, absl::StrCat(value,
                                       " needs fsdp.mixed_precision.param_dtype BF16 or FP16 "
                                       "(cuDNN's flash attention has no FP32 kernel), got ",
                                       param == v1::DTYPE_UNSPECIFIED ? "none (FP32)"
                                                                      : v1::Dtype_Name(param)));
  }
  // cuDNN's head sizes (worker/cuda/cudnn_requirements.h): a multiple of 8, at most 256 on
  // Hopper and 128 before; which GPU runs the job is the worker's to check, the rest can
  // be refused here rather than at the first forward on every attempt.
  const int64_t head =
      model.has_gpt() ? (model.gpt().n_head() > 0 ? model.gpt().n_embd() / model.gpt().n_head() : 0)
      : model.llama().head_dim() > 0 ? model.llama().head_dim()
      : model.llama().num_attention_heads() > 0
          ? model.llama().hidden_size() / model.llama().num_attention_heads()
          : 0;
  if (head > 0 && (head % 8 != 0 || head > 256)) {
    return Invalid(field, absl::StrCat(value,
                                       " needs a head size that is a multiple of 8 and at "
                                       "most 256 (128 before Hopper); this model's is ",
                                       head));
  }
  return absl::OkStatus();
}

// cuda.*: only on CUDA; the fused-attention options and 16-bit storage named where they
// can apply.
absl::Status ValidateCudaOptions(const v1::JobSpec& spec) {
  const v1::CudaOptions& cuda = spec.cuda();
  if (spec.device() != v1::CUDA) {
    return Invalid("cuda", absl::StrCat("is set, but device is ",
                                        spec.device() == v1::DEVICE_KIND_UNSPECIFIED
                                            ? "CPU (the default)"
                                            : v1::DeviceKind_Name(spec.device()),
                                        ", not CUDA"));
  }
  RETURN_IF_ERROR(CheckEnum("cuda.collectives", cuda.collectives(),
                            v1::CudaOptions::Collectives_IsValid, "NCCL or HOST_STAGED_GLOO"));
  RETURN_IF_ERROR(CheckEnum("cuda.fused_attention_kernel", cuda.fused_attention_kernel(),
                            v1::CudaOptions::FusedAttentionKernel_IsValid, "CUDNN or CUDA_CORES"));
  RETURN_IF_ERROR(CheckEnum("cuda.storage", cuda.storage(), v1::CudaOptions::Storage_IsValid,
                            "STORAGE_FP32 or STORAGE_PARAM_DTYPE"));
  const v1::Dtype param = spec.fsdp().mixed_precision().param_dtype();
  const bool sixteen_bit = param == v1::BF16 || param == v1::FP16;
  const std::string param_name =
      param == v1::DTYPE_UNSPECIFIED ? "none (FP32)" : v1::Dtype_Name(param);
  if (cuda.storage() == v1::CudaOptions::STORAGE_PARAM_DTYPE && !sixteen_bit) {
    return Invalid("cuda.storage",
                   absl::StrCat("STORAGE_PARAM_DTYPE stores in fsdp.mixed_precision.param_dtype, "
                                "which must be BF16 or FP16, got ",
                                param_name));
  }
  RETURN_IF_ERROR(CheckEnum("cuda.attention_backward", cuda.attention_backward(),
                            v1::CudaOptions::AttentionBackward_IsValid, "DETERMINISTIC or ATOMIC"));
  RETURN_IF_ERROR(CheckCudnnOption(spec, "cuda.fused_attention_kernel", "CUDNN",
                                   cuda.fused_attention_kernel() == v1::CudaOptions::CUDNN));
  const bool atomic = cuda.attention_backward() == v1::CudaOptions::ATOMIC;
  RETURN_IF_ERROR(CheckCudnnOption(spec, "cuda.attention_backward", "ATOMIC", atomic));
  if (atomic && cuda.fused_attention_kernel() == v1::CudaOptions::CUDA_CORES) {
    return Invalid("cuda.attention_backward",
                   "ATOMIC is cuDNN's backward, and cuda.fused_attention_kernel CUDA_CORES "
                   "runs Shardwise's own");
  }
  return absl::OkStatus();
}

absl::Status ValidateJobSpec(const v1::JobSpec& spec, const JobLimits& limits,
                             const PathChecker& check_path) {
  RETURN_IF_ERROR(CheckPrintableField("job.name", spec.name(), 128));
  RETURN_IF_ERROR(
      CheckCount("world_size", spec.world_size(), limits.max_world_size, false, limits.tunable));
  RETURN_IF_ERROR(CheckPathTexts(spec));
  RETURN_IF_ERROR(CheckEnum("device", spec.device(), v1::DeviceKind_IsValid, "CPU or CUDA"));
  // Before the model: a transformer's check names the loss it trains with.
  RETURN_IF_ERROR(CheckEnum("loss", spec.loss(), v1::Loss_IsValid, "CROSS_ENTROPY or MSE"));
  RETURN_IF_ERROR(ValidateModel(spec, limits));
  RETURN_IF_ERROR(ValidateFsdp(spec));
  // After the model and fsdp: its checks read their (valid) enums.
  if (spec.has_cuda()) RETURN_IF_ERROR(ValidateCudaOptions(spec));
  RETURN_IF_ERROR(ValidateOptimizer(spec.optimizer()));
  RETURN_IF_ERROR(ValidateOverlap(spec));
  RETURN_IF_ERROR(ValidateGradScaler(spec.grad_scaler()));
  RETURN_IF_ERROR(ValidateCommHook(spec.comm_hook(), spec));
  RETURN_IF_ERROR(ValidateData(spec, limits, check_path));
  RETURN_IF_ERROR(ValidateEvaluation(spec, limits));
  // Before the batch: its rows are laid out over the ranks max_replicas gives.
  RETURN_IF_ERROR(ValidateFaultTolerance(spec, limits));
  RETURN_IF_ERROR(CheckCount("global_batch_size", spec.global_batch_size(),
                             limits.max_global_batch_size, false));
  if (spec.global_batch_size() % JobRanks(spec) != 0) {
    return Invalid("global_batch_size",
                   absl::StrCat(spec.global_batch_size(), " is not divisible by ", RanksNamed(spec),
                                " ", JobRanks(spec)));
  }
  RETURN_IF_ERROR(CheckCount("steps", spec.steps(), limits.max_steps, false, limits.tunable));
  // The workers number each step's sequences (rows) step x global_batch_size + j
  // (worker/data/tokens.h): every number must fit an int64.
  if (const int64_t most = std::numeric_limits<int64_t>::max() / spec.global_batch_size();
      spec.steps() > most) {
    return Invalid("steps", absl::StrCat(spec.steps(), " steps of global_batch_size ",
                                         spec.global_batch_size(),
                                         " number more sequences than an "
                                         "int64 holds: at most ",
                                         most));
  }
  RETURN_IF_ERROR(ValidateLrSchedule(spec));
  RETURN_IF_ERROR(CheckCount("gradient_accumulation_steps", spec.gradient_accumulation_steps(),
                             limits.max_steps, /*zero_means_default=*/true, limits.tunable));
  // The pending losses are interval x micro-steps doubles of device memory.
  if (spec.loss_read_interval_steps() < 0 ||
      spec.loss_read_interval_steps() > kMaxLossReadInterval) {
    return Invalid("loss_read_interval_steps",
                   absl::StrCat("must be 1 to ", kMaxLossReadInterval, " (0: every step), got ",
                                spec.loss_read_interval_steps()));
  }
  // Each rank splits its B / ranks rows evenly over the micro-steps.
  const int64_t micro_steps = std::max(1, spec.gradient_accumulation_steps());
  if (spec.global_batch_size() % (JobRanks(spec) * micro_steps) != 0) {
    return Invalid(
        "global_batch_size",
        absl::StrCat(spec.global_batch_size(), " is not divisible by ", RanksNamed(spec),
                     " x job.gradient_accumulation_steps = ", JobRanks(spec) * micro_steps));
  }
  RETURN_IF_ERROR(ValidateInitAndOutput(spec, check_path));
  const int32_t join_timeout = spec.rendezvous().join_timeout_seconds();
  if (join_timeout < 0 || join_timeout > kMaxJoinTimeoutSeconds) {
    return Invalid("rendezvous.join_timeout_seconds",
                   absl::StrCat("must be 1 to ", kMaxJoinTimeoutSeconds,
                                " (0: ", kDefaultJoinTimeoutSeconds, "), got ", join_timeout));
  }
  if (spec.restart_policy().max_restarts() < 0 ||
      spec.restart_policy().max_restarts() > limits.max_restarts) {
    return Invalid("restart_policy.max_restarts",
                   absl::StrCat("must be in [0, ", limits.max_restarts, "], got ",
                                spec.restart_policy().max_restarts()));
  }
  return absl::OkStatus();
}

JobLimits LimitsLifted() {
  JobLimits limits;
  limits.tunable = "any coordinator's largest limit";
  limits.max_world_size = kWorldSizeCeiling;
  limits.max_parameters = std::numeric_limits<int64_t>::max();
  limits.max_steps = std::numeric_limits<int64_t>::max();
  return limits;
}

}  // namespace shardwise
