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
// arithmetic is FP32 (docs/semantics.md, "Mixed precision"). The device chooses how they
// are stored (Device::StorageType): in FP32 buffers, rounded in place, or in the compute
// type itself, which each operation rounds to as it writes: the same values. Statistics
// a backward reads (mean, rstd, lse, attention probabilities) stay FP32 buffers.
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
  // In the device's storage type for the job (Device::StorageType).
  virtual ConstTensorRef value(int param) const = 0;
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
  ScalarType storage = ScalarType::kFloat32;  // device->StorageType(compute)
  const ParameterTable* params = nullptr;
  const DeviceBatch* batch = nullptr;
  Allocator* allocator() const { return device->allocator(); }
  // A buffer for activations (or their gradients) of `numel` elements in the storage
  // type, uninitialised.
  Buffer Activations(size_t numel) const {
    return Buffer(allocator(), numel, MemoryCategory::kActivations, storage, /*zero=*/false);
  }
  // One of `numel` FP32 elements whatever the storage (statistics, tables).
  Buffer FloatActivations(size_t numel) const {
    return Buffer(allocator(), numel, MemoryCategory::kActivations, ScalarType::kFloat32,
                  /*zero=*/false);
  }
  // One of `like`'s size and type.
  Buffer ActivationsLike(const Buffer& like) const {
    return Buffer(allocator(), like.numel(), MemoryCategory::kActivations, like.type(),
                  /*zero=*/false);
  }
  // Rounds `buffer` to the compute type: in place where it is FP32; a 16-bit buffer
  // holds such values already.
  void Round(Buffer& buffer) const {
    if (buffer.type() != ScalarType::kFloat32) return;
    device->RoundToPrecision(compute, buffer.data(), buffer.numel());
  }
  // x += y, rounded: a residual's sum, or the gradient of an input that fed two branches.
  void AddRounded(Buffer& x, const Buffer& y) const {
    device->Accumulate(x.ref(), y.ref(), x.numel());
    Round(x);
  }
  // `buffer` (FP32, holding values of the compute type) in the storage type: itself, or
  // its 16-bit copy.
  Buffer Stored(Buffer buffer) const {
    if (storage == ScalarType::kFloat32 || buffer.type() == storage) return buffer;
    Buffer stored = Activations(buffer.numel());
    device->Narrow(storage, buffer.data(), stored.as<uint16_t>(), buffer.numel());
    return stored;
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
