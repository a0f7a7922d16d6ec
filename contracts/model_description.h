#ifndef SHARDWISE_CONTRACTS_MODEL_DESCRIPTION_H_
#define SHARDWISE_CONTRACTS_MODEL_DESCRIPTION_H_

// A job's model as pure data: its parameters with the names and shapes of PyTorch's
// state_dict, the modules that own them (what a wrap policy matches), and the stages its
// forward runs through, in order, with the parameters each reads. Nothing here computes:
// the coordinator uses it to validate a spec (parameter counts, names, the wrap policy),
// the workers to lay out flat parameters (contracts/fsdp_layout.h) and to build the modules
// that compute (worker/model/).
//
// Two kinds of model:
// - the MLP (model.layer_widths): module "2k" is Linear k (nn.Sequential's numbering,
//   activations between the Linears); one stage per Linear, its activation included;
// - the GPT (model.gpt, nanoGPT's model.py): modules transformer.wte, transformer.wpe,
//   transformer.h.N (blocks), transformer.ln_f and lm_head, each one stage, in that
//   order. lm_head.weight is transformer.wte.weight (tied): it is registered once, by the
//   token embedding, and read by the lm_head stage too.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// What a module is, for the wrap policy and for building its compute.
enum class ModuleKind {
  kLinearLayer,        // MLP: Linear (+ its activation)
  kTokenEmbedding,     // GPT: transformer.wte
  kPositionEmbedding,  // GPT: transformer.wpe
  kBlock,              // GPT: transformer.h.N
  kFinalNorm,          // GPT: transformer.ln_f (never a unit of its own)
  kLmHead,             // GPT: lm_head (its weight is the token embedding's)
};

struct ParameterDesc {
  std::string name;  // state-dict name: "0.weight", "transformer.h.0.ln_1.bias", ...
  std::vector<int64_t> shape;
  int module = 0;  // the module that registers it
  int64_t numel() const;
  // nanoGPT decays parameters of two or more dimensions (weights, embeddings) and not the
  // others (biases, LayerNorm weights): optimizer.weight_decay_params MATRICES.
  bool is_matrix() const { return shape.size() >= 2; }
};

struct ModuleDesc {
  std::string name;  // "2", "transformer.h.0", "lm_head"
  ModuleKind kind;
  int index = 0;  // among modules of its kind: Linear k, block N
};

struct StageDesc {
  int module = 0;               // the module whose forward the stage runs
  std::vector<int> params;      // every parameter it reads (a tied one included)
  bool checkpointable = false;  // activation checkpointing recomputes it in backward
};

struct ModelDescription {
  std::vector<ParameterDesc> params;  // registration order (named_parameters(), tied once)
  std::vector<ModuleDesc> modules;
  std::vector<StageDesc> stages;  // forward order
  int64_t num_parameters() const;
  // The index of the parameter named `name`, or -1.
  int FindParameter(const std::string& name) const;
};

// INVALID_ARGUMENT naming the field for a model that cannot be described (no widths, a
// GPT whose n_embd is not divisible by n_head, sizes that overflow, ...). Limits on sizes
// are the coordinator's (job_spec_validation.h).
absl::StatusOr<ModelDescription> DescribeModel(const v1::ModelSpec& model);

// Which FSDP unit holds each parameter and runs each stage: child units in the order
// their first stage runs, then the root unit (index num_units - 1), which wraps the
// model and holds every parameter no child holds.
struct UnitAssignment {
  int num_units = 1;
  std::vector<int> unit_of_param;
  std::vector<int> unit_of_stage;
  int root() const { return num_units - 1; }
};

// The wrap policy (job.wrap) over `model`. MLP: every `layers_per_unit` consecutive
// Linears form a child unit, leftovers go to the root. GPT: each module of the kinds in
// `modules` (default BLOCK) is a child unit (transformer_auto_wrap_policy). A parameter
// read by a module in a unit of its own is held by that unit. INVALID_ARGUMENT naming
// job.wrap when a stage would read a parameter another child unit holds (as wrapping the
// token embedding or the LM head does to their tied weight): that unit is sharded while
// the stage runs. A stage may read the root's parameters, which stay unsharded from the
// root's pre-forward to its post-backward.
absl::StatusOr<UnitAssignment> AssignUnits(const ModelDescription& model,
                                           const v1::WrapPolicy& wrap);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_MODEL_DESCRIPTION_H_
