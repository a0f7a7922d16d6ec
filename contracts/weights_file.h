#ifndef SHARDWISE_CONTRACTS_WEIGHTS_FILE_H_
#define SHARDWISE_CONTRACTS_WEIGHTS_FILE_H_

// A safetensors file of initial weights (init.safetensors_path) against the model it
// initialises. The coordinator checks the file at submission from its header, and a
// worker again as it reads it (the file may have changed since): one rule for both.

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/untrusted_file.h"
#include "contracts/element_range.h"
#include "contracts/model_description.h"
#include "contracts/safetensors.h"

namespace shardwise {

// OK if `index` holds every parameter of `model` as F32 with its shape; other tensors (a
// tied lm_head.weight, say) are ignored. Otherwise INVALID_ARGUMENT naming `path` and the
// first parameter missing, or of another dtype or shape.
absl::Status CheckWeightsFit(const ModelDescription& model, const SafetensorsIndex& index,
                             const std::string& path);

// Part of a parameter, FP32 in the model's layout: elements [range.begin, range.end) of
// its flat values (row-major) of `shape`, values[i] being element range.begin + i. Valid
// during the call it is given to only.
struct ParameterPiece {
  absl::Span<const int64_t> shape;
  ElementRange range;
  const float* values = nullptr;

  int64_t numel() const;
};

// Receives a model's parameters one at a time, by state-dict name, so that a reader never
// holds the whole model: for each tensor it gives, a reader asks what of it is wanted and
// gives that, possibly nothing (every tensor is given, so a receiver learns what it lacks).
// A rank wants what lies in its shards (worker/fsdp/shard_assembler.h), and a reader reads
// no more of a file than that where it can (ReadWeightsFile, ReadHuggingFaceWeights).
class ParameterReceiver {
 public:
  virtual ~ParameterReceiver() = default;

  // What of `name`, of `numel` elements, is wanted; empty for nothing.
  virtual ElementRange Wanted(const std::string& name, int64_t numel) const = 0;
  // `piece.range` is what Wanted said, clipped to the tensor (WantedWithin); an error
  // stops the reading and is returned.
  virtual absl::Status Take(const std::string& name, const ParameterPiece& piece) = 0;
};

// Part `wanted` of a parameter of `shape` whose values are all at `whole` (a tensor
// generated or held whole); no pointer where nothing is wanted.
ParameterPiece PieceOfWhole(absl::Span<const int64_t> shape, ElementRange wanted,
                            const float* whole);

// What a reader reads of a tensor of `numel` elements: what `receiver` wants of it,
// clipped to the tensor ({0, 0} where that is nothing).
ElementRange WantedWithin(const ParameterReceiver& receiver, const std::string& name,
                          int64_t numel);

// The tensors `read` gives the receiver it is called with, whole, collected by name (the
// collecting form of a reader that streams).
absl::StatusOr<TensorMap> CollectTensors(absl::FunctionRef<absl::Status(ParameterReceiver&)> read);

// Gives `receiver` the parameters of `model` from the file at `path`, opened as `links`
// says, in the model's registration order: its header checked with CheckWeightsFit, then
// of each tensor only what the receiver wants read (not the whole file). NOT_FOUND,
// INVALID_ARGUMENT or UNAVAILABLE as common/untrusted_file.h opens it, DATA_LOSS for a
// malformed file.
absl::Status ReadWeightsFile(const ModelDescription& model, const std::string& path, Links links,
                             ParameterReceiver& receiver);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_WEIGHTS_FILE_H_
