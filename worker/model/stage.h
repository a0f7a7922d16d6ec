#ifndef SHARDWISE_WORKER_MODEL_STAGE_H_
#define SHARDWISE_WORKER_MODEL_STAGE_H_

// A stage is one module's forward and backward as the runtime calls them: the MLP's
// Linear layers, a GPT's embeddings, blocks, final LayerNorm and head
// (contracts/model_description.h lists them). A model is its stages in order plus a loss.
//
// Between stages flows one activation (Flow::hidden) forward and its gradient
// (Flow::grad) backward; each stage replaces it with its own output. Parameters are not
// the stage's: the FSDP runtime binds each parameter's unsharded values and gradient
// (ParameterTable) before the stage runs, and a stage reads them by index. What a
// stage's backward needs it keeps from its forward, until its Backward or DropSaved.
//
// Mixed precision: every stage rounds what it outputs (activations forward, activation
// gradients backward) to the compute type, as PyTorch holds them in param_dtype;
// arithmetic is FP32 (docs/semantics.md, "Mixed precision").
//
// Thread-safety: none; a stage belongs to one rank's training thread.

#include <cstdint>

#include "worker/compute/device.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::model {

// Each parameter's values and gradient, by its index in the ModelDescription: the
// unsharded buffers of the unit that holds it, bound while the stage runs.
class ParameterTable {
 public:
  virtual ~ParameterTable() = default;
  virtual const float* value(int param) const = 0;
  virtual float* grad(int param) const = 0;  // accumulated into
};

// A micro-batch on the device.
struct DeviceBatch {
  int64_t rows = 0;             // samples (MLP) or token positions (GPT: sequences * length)
  int64_t sequences = 0;        // GPT
  int64_t sequence_length = 0;  // GPT
  Buffer inputs;                // MLP: FP32 [rows, in]
  Buffer tokens;                // GPT: INT64 [rows]
  Buffer positions;             // GPT: INT64 [rows], the position of each token in its sequence
  Buffer labels;                // INT64 [rows]: the class (MLP) or the next token (GPT)
  Buffer targets;               // MLP with MSE: FP32 [rows, out]
};

struct StageContext {
  Device* device = nullptr;
  ScalarType compute = ScalarType::kFloat32;  // param_dtype
  const ParameterTable* params = nullptr;
  const DeviceBatch* batch = nullptr;
  Allocator* allocator() const { return device->allocator(); }
  // A buffer for activations (or their gradients) of `numel` FP32 elements, uninitialised.
  Buffer Activations(size_t numel) const {
    return Buffer(allocator(), numel, MemoryCategory::kActivations, /*zero=*/false);
  }
  // Rounds `buffer` to the compute type.
  void Round(Buffer& buffer) const {
    device->RoundToPrecision(compute, buffer.data(), buffer.numel());
  }
  // x += y, rounded: a residual's sum, or the gradient of an input that fed two branches.
  void AddRounded(Buffer& x, const Buffer& y) const {
    device->Accumulate(x.data(), y.data(), x.numel());
    Round(x);
  }
};

struct Flow {
  Buffer hidden;  // forward: the stage's input, replaced by its output
  Buffer grad;    // backward: the gradient of its output, replaced by its input's
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual void Forward(const StageContext& context, Flow& flow) = 0;
  // Adds the parameters' gradients into the table's; the first stage may leave
  // flow.grad empty (no input gradient).
  virtual void Backward(const StageContext& context, Flow& flow) = 0;
  // Frees what Forward kept for Backward (activation checkpointing, evaluation).
  virtual void DropSaved() = 0;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_STAGE_H_
